#!/usr/bin/env node
import "./zod-jitless.js"; // first: zod reads it when schemas are built
import type { RequestListener } from "node:http";
import { createLogger } from "../src/logging.js";
import { listen, listenSocket, onShutdownSignal, type UpgradeListener } from "../src/serve.js";
import { exitOnStartFailure, listenFailure, optionErrorLine } from "../src/startup.js";
import { enableUpgrade, openAgent, shutdownAgent } from "./agent.js";
import { awaitHandover, UpgradeState } from "./system/upgrade.js";
import { createApp } from "./app.js";
import { DataDirLockedError } from "./data-dir-lock.js";
import { AGENT_USAGE, ConfigError, parseAgentConfig } from "./config.js";
import { servePortHandoff } from "./ports/handoff.js";
import { serveEgressGateway } from "./ports/gateway.js";
import { serveEgressRelay } from "./ports/egress-relay.js";
import { serveEgressTunnel } from "./ports/egress-tunnel.js";
import { ensureDirectory } from "./start-checks.js";
import { openat2Support } from "./paths/openat2.js";
import { withInSandboxPort } from "./http/in-sandbox-port.js";

async function main(): Promise<void> {
  let config;
  try {
    config = parseAgentConfig(process.argv.slice(2), process.env);
    const support = openat2Support();
    // Demanded, not available: a usage error in one line, as any other option's (auto falls back and says why).
    if (config !== "help" && config.confinement === "openat2" && !support.available) throw new ConfigError(`--confinement openat2: ${support.reason}`);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(optionErrorLine("sandbox-agent", err.message));
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(AGENT_USAGE);
    return;
  }
  const logger = createLogger({ name: "sandbox-agent", level: config.logLevel, format: config.logFormat });
  // Started by POST /upgrade: the agent it replaces still holds the address and the data dir until it lets go.
  const handover = awaitHandover(process.env);
  const upgrades = UpgradeState.fromEnv(process.env);
  await handover;
  if (config.portHandoff) {
    servePortHandoff(process, logger);
    serveEgressGateway(process, logger);
  }
  const relays = config.egressRelay ? serveEgressRelay(config.egressRelay, logger) : [];
  const tunnels = config.egressTunnel ? serveEgressTunnel(config.egressTunnel, config.token, logger) : undefined;
  // The port is taken before anything starts (scheduler, sweepers), so a port in use ends the agent
  // before it has done or logged anything; requests are answered once the app exists, which is before
  // the "listening on" line launchers wait for.
  let app: (RequestListener & UpgradeListener) | undefined;
  const handler: RequestListener & UpgradeListener = (req, res) => {
    if (app) return app(req, res);
    res.writeHead(503, { "content-type": "application/json" }).end('{"error":"the agent is starting"}');
  };
  handler.onUpgrade = (req, socket, head) => {
    if (tunnels?.upgrade(req, socket, head)) return;
    if (app?.onUpgrade) app.onUpgrade(req, socket, head);
    else socket.destroy();
  };
  // --socket: a Unix socket (the isolating launcher binds its directory out of the sandbox), else host:port.
  const listening = config.socket
    ? listenSocket(handler, config.socket, { maxConnections: config.maxConnections })
    : listen(handler, config.host, config.port, { maxConnections: config.maxConnections });
  const served = await withInSandboxPort(
    await listening.catch((err: unknown) => {
      throw listenFailure(err, config.host, config.port) ?? err;
    }),
    handler,
    config.inSandboxPort,
    config.maxConnections,
  );
  // The egress listeners go with the agent's own (an upgrade's new agent binds them again once this one lets go).
  const serving = {
    ...served,
    stop: (graceMs?: number) => {
      relays.forEach((s) => s.close());
      tunnels?.close();
      return served.stop(graceMs);
    },
  };
  const rootState = ensureDirectory(config.root, "--root");
  ensureDirectory(config.dataDir, "--data-dir");
  if (rootState === "created") logger.info({ root: config.root }, "the sandbox root did not exist: created it");
  const runtime = await openAgent(config, { logger, upgrades });
  app = createApp(runtime.deps);
  enableUpgrade(serving, runtime, process.argv.slice(2), logger);
  logger.info(
    {
      url: serving.url,
      root: runtime.deps.paths.hostRoot,
      confinement: runtime.deps.paths.confinement,
      dataDir: config.dataDir,
      auth: config.token ? "token" : "none",
    },
    "sandbox-agent listening",
  );
  // A machine-readable line on stdout, so launchers learn the port when --port 0 was given (unix:<path> with --socket).
  process.stdout.write(`sandbox-agent listening on ${serving.url}\n`);
  onShutdownSignal(logger, () => shutdownAgent(serving, runtime));
}

main().catch((err) => {
  // A second agent on the same data dir: one line naming the first one (exit 1, as before the lock existed).
  if (err instanceof DataDirLockedError) {
    process.stderr.write(`sandbox-agent: ${err.message}\n`);
    process.exit(1);
  }
  exitOnStartFailure("sandbox-agent", err, (e) => e instanceof ConfigError);
});
