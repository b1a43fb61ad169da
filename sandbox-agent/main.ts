#!/usr/bin/env node
import { createLogger } from "../src/logging.js";
import { listen, listenSocket, onShutdownSignal } from "../src/serve.js";
import { openAgent } from "./agent.js";
import { createApp } from "./app.js";
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
  const app = createApp(runtime.deps);
  const serving = config.socket ? await listenSocket(app, config.socket) : await listen(app, config.host, config.port);
  logger.info(
    { url: serving.url, root: runtime.deps.paths.hostRoot, dataDir: config.dataDir, auth: config.token ? "token" : "none" },
    "sandbox-agent listening",
  );
  // A machine-readable line on stdout, so launchers learn the port when --port 0 was given (unix:<path> with --socket).
  process.stdout.write(`sandbox-agent listening on ${serving.url}\n`);
  onShutdownSignal(logger, async () => {
    await serving.stop();
    await runtime.close();
  });
}

main().catch((err) => {
  process.stderr.write(`sandbox-agent: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
