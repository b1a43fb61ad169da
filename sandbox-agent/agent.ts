import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { systemClock, type Clock } from "../src/clock.js";
import { uuidIds, type Ids } from "../src/ids.js";
import { silentLogger, type Logger } from "../src/logging.js";
import { migrate, openDatabase, type Db } from "../src/sqlite.js";
import type { AgentConfig } from "./config.js";
import { DRIVE_MIGRATIONS, openDrives, type DriveService } from "./drives/index.js";
import { recoverUploads, startUploadSweeper } from "./multipart/maintenance.js";
import { MultipartService } from "./multipart/service.js";
import { MULTIPART_MIGRATIONS, UploadStore } from "./multipart/store.js";
import { SandboxPaths } from "./paths/sandbox-path.js";
import { ProcessManager } from "./process/manager.js";
import { readOomKills } from "./process/os.js";
import { PROCESS_MIGRATIONS } from "./process/store.js";
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
  schedules: Schedules;
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
}

/**
 * Opens the agent's state in its data dir (the SQLite database, upload parts),
 * repairs what a crash may have left, and starts background work.
 */
export async function openAgent(config: AgentConfig, overrides: AgentOverrides = {}): Promise<AgentRuntime> {
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? uuidIds;
  const logger = overrides.logger ?? silentLogger();
  mkdirSync(config.dataDir, { recursive: true });
  const db = openDatabase(join(config.dataDir, "agent.db"));
  migrate(db, [...MULTIPART_MIGRATIONS, ...PROCESS_MIGRATIONS, ...DRIVE_MIGRATIONS, ...SCHEDULE_MIGRATIONS]);
  const paths = new SandboxPaths(config.root);

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
    wrapper: config.processWrapper,
    oomKills: config.memoryEvents ? () => readOomKills(config.memoryEvents!) : undefined,
  });
  processes.recover();

  // Drives stay mounted across agent restarts; openDrives adopts them.
  const drives = await openDrives(config, db, paths, clock, logger);

  // Schedules fire here even when the control plane is unreachable; start()
  // marks runs a dead agent left behind and fires what was missed, once.
  const schedules = createSchedules({ db, runner: processes, clock, ids, logger, sandbox: config.sandboxName });
  schedules.scheduler.start();

  const deps: AgentDeps = { config, paths, db, clock, ids, logger, multipart, processes, drives, schedules, startedAt: clock.now() };
  let closed = false;
  return {
    deps,
    async close() {
      if (closed) return;
      closed = true;
      sweeper.stop();
      schedules.scheduler.stop();
      processes.close(); // stops watching; the processes themselves keep running
      // Drives are left mounted on purpose: processes may still use them.
      db.close();
    },
  };
}
