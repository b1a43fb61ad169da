#!/usr/bin/env node
import { createLogger } from "../src/logging.js";
import { onShutdownSignal } from "../src/serve.js";
import { serveSimulator } from "./agents/serve.js";
import { ConfigError, parseSimConfig, SIM_USAGE } from "./config.js";
import { imagesCli } from "./images/cli.js";

async function main(): Promise<void> {
  // `sandbox-sim images ...`: the image store's commands (docs/images.md).
  if (process.argv[2] === "images") {
    process.exitCode = await imagesCli(process.argv.slice(3), process.env, process.stdout, process.stderr);
    return;
  }
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
  // Control plane, sandbox proxy and one real sandbox-agent per sandbox (simulator/agents/serve.ts).
  const served = await serveSimulator(config, { logger });
  logger.info({ url: served.url, data: config.data, testHooks: config.testHooks, launcher: config.launcher }, "sandbox-sim listening");
  // The lines a user pastes (or `eval`s) to point the SDK at this simulator.
  process.stdout.write(`sandbox-sim listening on ${served.url}\n${served.envText}\n`);
  onShutdownSignal(logger, () => served.stop());
}

main().catch((err) => {
  process.stderr.write(`sandbox-sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
