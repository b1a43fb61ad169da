#!/usr/bin/env node
/**
 * A sandbox-agent started ahead of need: it loads the agent's modules (the
 * bulk of its start-up time), then waits for its sandbox's command line and
 * environment on the IPC channel, and from there runs exactly as
 * sandbox-agent/main.ts does. The process launcher keeps one or two idle, so
 * creating a sandbox costs opening its database and listening, not loading Node modules.
 */
import "../../sandbox-agent/zod-jitless.js"; // first: zod reads it when schemas are built
import { createLogger } from "../../src/logging.js";
import { listen, listenSocket, onShutdownSignal } from "../../src/serve.js";
import { enableUpgrade, openAgent, shutdownAgent } from "../../sandbox-agent/agent.js";
import { UpgradeState } from "../../sandbox-agent/system/upgrade.js";
import { createApp } from "../../sandbox-agent/app.js";
import { ConfigError, parseAgentConfig } from "../../sandbox-agent/config.js";
import { DataDirLockedError } from "../../sandbox-agent/data-dir-lock.js";
import { servePortHandoff } from "../../sandbox-agent/ports/handoff.js";
import { withInSandboxPort } from "../../sandbox-agent/http/in-sandbox-port.js";
import { serveEgressGateway } from "../../sandbox-agent/ports/gateway.js";

export interface WarmActivation {
  argv: string[];
  env: Record<string, string>;
}

let activated = false;

async function activate(message: WarmActivation): Promise<void> {
  activated = true;
  // The sandbox's environment replaces the launcher's: processes the agent runs inherit process.env.
  for (const key of Object.keys(process.env)) delete process.env[key];
  Object.assign(process.env, message.env);
  const config = parseAgentConfig(message.argv, process.env);
  if (config === "help") throw new ConfigError("--help is not a sandbox configuration");
  const logger = createLogger({ name: "sandbox-agent", level: config.logLevel });
  // The channel stays only to hand over connections to the sandbox's ports (--port-handoff).
  if (config.portHandoff) {
    servePortHandoff(process, logger);
    serveEgressGateway(process, logger);
  } else process.disconnect?.();
  const runtime = await openAgent(config, { logger, upgrades: UpgradeState.fromEnv(process.env) });
  const app = createApp(runtime.deps);
  const serving = await withInSandboxPort(
    config.socket
      ? await listenSocket(app, config.socket, { maxConnections: config.maxConnections })
      : await listen(app, config.host, config.port, { maxConnections: config.maxConnections }),
    app,
    config.inSandboxPort,
    config.maxConnections,
  );
  logger.info(
    { url: serving.url, root: runtime.deps.paths.hostRoot, dataDir: config.dataDir, auth: config.token ? "token" : "none", warm: true },
    "sandbox-agent listening",
  );
  process.stdout.write(`sandbox-agent listening on ${serving.url}\n`);
  enableUpgrade(serving, runtime, message.argv, logger);
  onShutdownSignal(logger, () => shutdownAgent(serving, runtime));
}

process.once("message", (message) => {
  activate(message as WarmActivation).catch((err) => {
    const plain = err instanceof ConfigError || err instanceof DataDirLockedError;
    process.stderr.write(`sandbox-agent: ${err instanceof Error ? (plain ? err.message : (err.stack ?? err.message)) : String(err)}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  });
});
// An idle warm agent whose launcher went away has nothing left to wait for.
process.on("disconnect", () => {
  if (!activated) process.exit(0);
});
process.on("SIGTERM", () => {
  if (!activated) process.exit(0);
});
// Modules are loaded (static imports) and the listener is in place: tell the launcher it may activate us.
process.send?.("warm");
