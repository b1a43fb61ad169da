#!/usr/bin/env node
import { writeFileSync } from "node:fs";
import { createLogger } from "../src/logging.js";
import { onShutdownSignal } from "../src/serve.js";
import { exitOnStartFailure, optionErrorLine, StartupError } from "../src/startup.js";
import { serveSimulator } from "./serve.js";
import { ConfigError, parseSimConfig, SIM_USAGE } from "./config.js";
import { CONSOLE_PATH } from "./console/serve.js";
import { dotenvLines } from "./env-lines.js";
import { imagesCli } from "./images/cli.js";
import { LaunchError } from "./launcher/index.js";

/** SIGTERM to exit: the graceful stop gets this long, then the rest is killed (a supervisor stops after 10 s). */
const SHUTDOWN_DEADLINE_MS = 9_000;

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
  // Control plane, sandbox proxy and one real sandbox-agent per sandbox (simulator/serve.ts).
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
  logger.info(
    { url: served.url, console: consoleUrl, data: config.data, testHooks: config.testHooks, ...served.deps.sandboxIsolation },
    "sandbox-sim listening",
  );
  if (!served.deps.sandboxIsolation.isolated) process.stderr.write(`sandbox-sim: WARNING: sandboxes are ${served.deps.sandboxIsolation.detail}\n`);
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
  const building = served.deps.images.prebuildStatus();
  if (building?.state === "building") {
    process.stdout.write(
      `sandbox-sim: building ${building.image} in the background (once per machine, about a minute on an idle one; sandboxes created meanwhile wait for it; progress in the log, GET /health and the console)\n`,
    );
    void served.prebuilt.then(
      (s) =>
        s &&
        process.stdout.write(
          s.state === "ready" ? `sandbox-sim: ${s.image} ready (${s.seconds} s)\n` : `sandbox-sim: ${s.image} could not be built: ${s.error}\n`,
        ),
    );
  }
  // However a shutdown ends (done, past its deadline, a second signal's immediate exit), the process's
  // exit kills what is left of the sandboxes and removes the temp dir (abandon() is a no-op after stop()).
  process.once("exit", () => served.abandon());
  onShutdownSignal(logger, () => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        logger.warn({ afterMs: SHUTDOWN_DEADLINE_MS }, "shutdown is taking too long: ending the sandboxes now");
        resolve();
      }, SHUTDOWN_DEADLINE_MS);
    });
    return Promise.race([served.stop(), late]).finally(() => clearTimeout(timer));
  });
}

main().catch((err) => exitOnStartFailure("sandbox-sim", err, (e) => e instanceof ConfigError));
