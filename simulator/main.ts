#!/usr/bin/env node
import { createLogger } from "../src/logging.js";
import { listen, onShutdownSignal } from "../src/serve.js";
import { createSimulatorApp } from "./app.js";
import { ConfigError, parseSimConfig, SIM_USAGE } from "./config.js";
import { openSimulator } from "./deps.js";
import { envLines } from "./env-lines.js";

async function main(): Promise<void> {
  let config;
  try {
    config = parseSimConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`sandbox-sim: ${err.message}\n\n${SIM_USAGE}`);
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(SIM_USAGE);
    return;
  }
  const logger = createLogger({ name: "sandbox-sim", level: config.logLevel });
  const runtime = openSimulator(config, { logger });
  const serving = await listen(createSimulatorApp(runtime.deps), config.host, config.port);
  runtime.deps.urls.base = config.publicUrl ?? serving.url;
  logger.info({ url: serving.url, data: config.data, testHooks: config.testHooks }, "sandbox-sim listening");
  // The lines a user pastes (or `eval`s) to point the SDK at this simulator.
  process.stdout.write(`sandbox-sim listening on ${serving.url}\n${envLines(runtime.deps, serving.url)}\n`);
  onShutdownSignal(logger, async () => {
    await serving.stop();
    runtime.close();
  });
}

main().catch((err) => {
  process.stderr.write(`sandbox-sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
