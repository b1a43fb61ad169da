import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { systemClock, type Clock } from "../src/clock.js";
import { uuidIds, type Ids } from "../src/ids.js";
import { silentLogger, type Logger } from "../src/logging.js";
import { migrate, openDatabase, type Db } from "../src/sqlite.js";
import type { AgentConfig } from "./config.js";
import { lockDataDir } from "./data-dir-lock.js";
import { DRIVE_MIGRATIONS, openDrives, type DriveService } from "./drives/index.js";
import { recoverUploads, startUploadSweeper } from "./multipart/maintenance.js";
import { MultipartService } from "./multipart/service.js";
import { MULTIPART_MIGRATIONS, UploadStore } from "./multipart/upload-store.js";
import { SandboxPaths, type RootDescriptor } from "./paths/sandbox-path.js";
import { OwnWrites } from "./paths/own-writes.js";
import { SandboxEnvironment } from "./environment.js";
import { PortMonitors } from "./network/monitor.js";
import { SearchPool } from "./search/pool.js";
import { WatchRegistry } from "./watch/watcher.js";
import { UpgradeState, upgradeAgent } from "./system/upgrade.js";
import { cpus } from "node:os";
import { ProcessManager } from "./process/manager.js";
import { readOomKills } from "./process/os.js";
import type { Spawner } from "./process/spawn.js";
import type { TerminalEntry } from "./process/ns-spawn.js";
import { PROCESS_MIGRATIONS } from "./process/process-store.js";
import { SecretBox } from "./schedules/sealed-env.js";
import { createSchedules, SCHEDULE_MIGRATIONS, type Schedules } from "./schedules/schedules.js";

/** What createApp needs: the agent's services, built once from the config. */
export interface AgentDeps {
  config: AgentConfig;
  paths: SandboxPaths;
  db: Db;
  clock: Clock;
  ids: Ids;
  logger: Logger;
  multipart: MultipartService;
  drives: DriveService;
  processes: ProcessManager;
  /** The environment processes start with (POST /environment/reload overlays it). */
  environment: SandboxEnvironment;
  portMonitors: PortMonitors;
  schedules: Schedules;
  /** Worker threads for find, fuzzy search and content search. */
  search: SearchPool;
  /** The filesystem watches held by /watch streams. */
  watches: WatchRegistry;
  /** Upgrades of this sandbox's agent (/health) and the hook POST /upgrade calls. */
  upgrades: UpgradeState;
  /** Set by an agent host: terminals start through it (process/ns-spawn.ts). */
  terminalEntry?: TerminalEntry;
  startedAt: number;
}

export interface AgentRuntime {
  deps: AgentDeps;
  /** Stops background work and closes the database. Idempotent. */
  close(): Promise<void>;
}

export interface AgentOverrides {
  clock?: Clock;
  ids?: Ids;
  logger?: Logger;
  upgrades?: UpgradeState;
  /** How commands start (default: the agent's children); an agent host serving this sandbox from outside enters it (process/ns-spawn.ts). */
  spawner?: Spawner;
  /** The sandbox's root as a held descriptor (an agent host: `/proc/<pid1>/root`), kernel-confined; default config.root. */
  root?: RootDescriptor;
  /** The environment commands start with (default: this process's): an agent host passes the sandbox's own. */
  baseEnv?: NodeJS.ProcessEnv;
  /** Search workers shared with other instances (an agent host); default: the agent's own pool, closed with it. */
  search?: SearchPool;
  /** How a terminal's shell enters the sandbox from outside (an agent host, with `spawner`); default: the agent's child. */
  terminalEntry?: TerminalEntry;
}

/**
 * Opens the agent's state in its data dir (the SQLite database, upload parts),
 * repairs what a crash may have left, and starts background work.
 */
export async function openAgent(config: AgentConfig, overrides: AgentOverrides = {}): Promise<AgentRuntime> {
  mkdirSync(config.dataDir, { recursive: true });
  const lock = lockDataDir(config.dataDir);
  try {
    return await openLocked(config, overrides, lock);
  } catch (err) {
    lock.release();
    throw err;
  }
}

async function openLocked(config: AgentConfig, overrides: AgentOverrides, lock: { release(): void }): Promise<AgentRuntime> {
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? uuidIds;
  const logger = overrides.logger ?? silentLogger();
  const db = openDatabase(join(config.dataDir, "agent.db"));
  migrate(db, [...MULTIPART_MIGRATIONS, ...PROCESS_MIGRATIONS, ...DRIVE_MIGRATIONS, ...SCHEDULE_MIGRATIONS]);
  // The agent's own state may lie under --root (the isolating launchers mount it inside the sandbox): never reachable through the API.
  // Made now, so it is hidden from the first request (a write could otherwise create it as a plain directory).
  const drivesDir = config.drivesDir ?? join(config.dataDir, "drives");
  mkdirSync(drivesDir, { recursive: true });
  const paths = new SandboxPaths(overrides.root ?? config.root, {
    hidden: [config.dataDir, drivesDir],
    ownWrites: new OwnWrites(clock),
    confinement: config.confinement,
  });
  await ensureWorkingDir(paths, config.workingDir, logger);

  const multipart = new MultipartService({
    store: new UploadStore(db),
    dir: join(config.dataDir, "uploads"),
    paths,
    clock,
    ids,
    logger,
    expiryMs: config.uploadExpiryMs,
    maxOpenUploads: config.maxOpenUploads,
  });
  await recoverUploads(multipart);
  const sweeper = startUploadSweeper(multipart, clock);

  const environment = new SandboxEnvironment(overrides.baseEnv ?? process.env, config.metadataPath);
  // Processes outlive the agent (as the reference daemon's do): recover() adopts
  // the survivors and marks the vanished ones failed with "agent restarted".
  const processes = new ProcessManager({
    db,
    paths,
    clock,
    logger,
    logDir: join(config.dataDir, "process-logs"),
    logMaxBytes: config.processLogMaxBytes,
    stopGraceMs: config.processStopGraceMs,
    maxFinished: config.processHistory,
    baseEnv: () => environment.current(),
    wrapper: config.processWrapper,
    defaultWorkingDir: config.workingDir,
    oomKills: config.memoryEvents ? () => readOomKills(config.memoryEvents!) : undefined,
    spawner: overrides.spawner,
  });
  processes.recover();
  const portMonitors = new PortMonitors({ runOf: (pid) => processes.runOf(pid), logger });

  // Drives stay mounted across agent restarts; openDrives adopts them.
  const drives = await openDrives(config, db, paths, clock, logger);

  // Schedules fire here even when the control plane is unreachable; start()
  // marks runs a dead agent left behind and fires what was missed, once.
  const secrets = SecretBox.fromKeyFile(config.secretsKeyFile ?? join(config.dataDir, "secrets.key"));
  const schedules = createSchedules({ db, runner: processes, clock, ids, logger, sandbox: config.sandboxName, secrets });
  schedules.scheduler.start();

  const search = overrides.search ?? new SearchPool({ size: Math.min(2, cpus().length), logger });
  const watches = new WatchRegistry();
  const upgrades = overrides.upgrades ?? new UpgradeState();
  const deps: AgentDeps = {
    config,
    paths,
    db,
    clock,
    ids,
    logger,
    multipart,
    processes,
    environment,
    portMonitors,
    drives,
    schedules,
    search,
    watches,
    upgrades,
    terminalEntry: overrides.terminalEntry,
    startedAt: clock.now(),
  };
  let closed = false;
  return {
    deps,
    async close() {
      if (closed) return;
      closed = true;
      sweeper.stop();
      schedules.scheduler.stop();
      portMonitors.close();
      processes.close(); // stops watching; the processes themselves keep running
      if (!overrides.search) await search.close();
      await paths.close(); // its root descriptor, rather than a FileHandle closed by the garbage collector
      // Drives are left mounted on purpose: processes may still use them.
      db.close();
      lock.release();
    },
  };
}

/**
 * SIGTERM/SIGINT: stop accepting, end log and exec streams at once (their
 * processes keep running: they outlive the agent), give other requests in
 * flight a grace period, then close the state.
 */
export async function shutdownAgent(
  serving: { stop(graceMs?: number): Promise<void> },
  runtime: AgentRuntime,
  graceMs = 10_000,
  handOver = false,
): Promise<void> {
  const stopped = serving.stop(graceMs);
  runtime.deps.processes.close(handOver);
  await stopped;
  await runtime.close();
}

/** The default directory of commands exists, as a container runtime makes the image's WorkingDir; a failure only leaves commands to say so. */
async function ensureWorkingDir(paths: SandboxPaths, workingDir: string, logger: Logger): Promise<void> {
  if (workingDir === "/") return;
  try {
    await paths.mkdirp(workingDir);
  } catch (err) {
    logger.warn({ workingDir, err: (err as Error).message }, "the default working directory could not be created");
  }
}

/**
 * Makes POST /upgrade work for an agent served by this entry point: `argv` is how it was configured (its
 * command line, or a warm agent's activation). The old agent stops serving within a short grace (the SDK
 * retries the gap) and hands its commands over.
 */
export function enableUpgrade(serving: { port: number; stop(graceMs?: number): Promise<void> }, runtime: AgentRuntime, argv: string[], logger: Logger): void {
  const { upgrades, config } = runtime.deps;
  upgrades.trigger = (version) => {
    void upgradeAgent(
      { state: upgrades, logger, argv, token: config.token, port: serving.port, release: () => shutdownAgent(serving, runtime, 2_000, true) },
      version,
    ).catch((err: unknown) => logger.error({ err }, "upgrade failed"));
  };
}
