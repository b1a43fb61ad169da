#!/usr/bin/env node
import { createLogger } from "../src/logging.js";
import { listen, onShutdownSignal } from "../src/serve.js";
import { openAgent, shutdownAgent } from "./agent.js";
import { createApp } from "./app.js";
import { DataDirLockedError } from "./data-dir-lock.js";
import { AGENT_USAGE, ConfigError, parseAgentConfig } from "./config.js";

async function main(): Promise<void> {
  let config;
  try {
    config = parseAgentConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`sandbox-agent: ${err.message}\n\n${AGENT_USAGE}`);
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(AGENT_USAGE);
    return;
  }
  const logger = createLogger({ name: "sandbox-agent", level: config.logLevel });
  const runtime = await openAgent(config, { logger });
  const serving = await listen(createApp(runtime.deps), config.host, config.port, { maxConnections: config.maxConnections });
  logger.info(
    { url: serving.url, root: runtime.deps.paths.hostRoot, dataDir: config.dataDir, auth: config.token ? "token" : "none" },
    "sandbox-agent listening",
  );
  // A machine-readable line on stdout, so launchers learn the port when --port 0 was given.
  process.stdout.write(`sandbox-agent listening on ${serving.url}\n`);
  onShutdownSignal(logger, () => shutdownAgent(serving, runtime));
}

main().catch((err) => {
  if (err instanceof DataDirLockedError) {
    process.stderr.write(`sandbox-agent: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`sandbox-agent: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
