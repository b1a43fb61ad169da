#!/usr/bin/env node
import { writeFileSync } from "node:fs";
import { createLogger } from "../src/logging.js";
import { onShutdownSignal } from "../src/serve.js";
import { exitOnStartFailure, optionErrorLine, StartupError } from "../src/startup.js";
import { serveSimulator } from "./agents/serve.js";
import { ConfigError, parseSimConfig, SIM_USAGE } from "./config.js";
import { CONSOLE_PATH } from "./console/serve.js";
import { dotenvLines } from "./env-lines.js";
import { imagesCli } from "./images/cli.js";
import { LaunchError } from "./launcher/index.js";

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
    process.stderr.write(optionErrorLine("sandbox-sim", err.message));
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(SIM_USAGE);
    return;
  }
  const logger = createLogger({ name: "sandbox-sim", level: config.logLevel, format: config.logFormat });
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
  const consoleUrl = `${served.url}${CONSOLE_PATH}`;
  logger.info({ url: served.url, console: consoleUrl, data: config.data, testHooks: config.testHooks, ...served.deps.sandboxIsolation }, "sandbox-sim listening");
  if (!served.deps.sandboxIsolation?.isolated) process.stderr.write(`sandbox-sim: WARNING: sandboxes are ${served.deps.sandboxIsolation?.detail ?? "not isolated"}\n`);
  if (config.writeEnv) {
    try {
      writeFileSync(config.writeEnv, dotenvLines(served.env), { mode: 0o600 });
    } catch (err) {
      await served.stop();
      throw new StartupError(`--write-env ${config.writeEnv} cannot be written: ${(err as Error).message}`);
    }
  }
  // The lines a user pastes into a shell to point the SDK at this simulator, and where the web console is.
  process.stdout.write(`sandbox-sim listening on ${served.url}\nsandbox-sim console: ${consoleUrl} (sign in with BL_API_KEY)\n${served.envText}\n`);
  onShutdownSignal(logger, () => served.stop());
}

main().catch((err) => exitOnStartFailure("sandbox-sim", err, (e) => e instanceof ConfigError));
