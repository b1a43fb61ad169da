#!/usr/bin/env node
import { createLogger } from "../src/logging.js";
import { onShutdownSignal } from "../src/serve.js";
import { serveSimulator } from "./agents/serve.js";
import { ConfigError, parseSimConfig, SIM_USAGE } from "./config.js";
import { LaunchError } from "./launcher/index.js";

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
  // Control plane, sandbox proxy and one real sandbox-agent per sandbox (simulator/agents/serve.ts).
  let served;
  try {
    served = await serveSimulator(config, { logger });
  } catch (err) {
    if (!(err instanceof LaunchError)) throw err;
    // No isolation possible here (or its tools are missing): one line saying what to install or pass.
    process.stderr.write(`sandbox-sim: ${err.message}\n`);
    process.exit(2);
  }
  logger.info({ url: served.url, data: config.data, testHooks: config.testHooks, ...served.deps.sandboxIsolation }, "sandbox-sim listening");
  if (!served.deps.sandboxIsolation?.isolated) process.stderr.write(`sandbox-sim: WARNING: sandboxes are ${served.deps.sandboxIsolation?.detail ?? "not isolated"}\n`);
  // The lines a user pastes (or `eval`s) to point the SDK at this simulator.
  process.stdout.write(`sandbox-sim listening on ${served.url}\n${served.envText}\n`);
  onShutdownSignal(logger, () => served.stop());
}

main().catch((err) => {
  process.stderr.write(`sandbox-sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
