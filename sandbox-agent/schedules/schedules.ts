import type { Clock } from "../../src/clock.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import type { Db } from "../../src/sqlite.js";
import { uuidV7 } from "./execution-ids.js";
import type { ScheduleRunner } from "./runner.js";
import { Scheduler } from "./scheduler.js";
import { ScheduleService } from "./service.js";
import type { SecretBox } from "./sealed-env.js";
import { ScheduleStore } from "./schedule-store.js";

export { SCHEDULE_MIGRATIONS } from "./schedule-store.js";
export type { ScheduleRunner } from "./runner.js";

export interface SchedulesOptions {
  /** Migrated with SCHEDULE_MIGRATIONS. */
  db: Db;
  runner: ScheduleRunner;
  clock: Clock;
  ids: Ids;
  /** Execution ids; default time-ordered UUIDv7 (see execution-ids.ts). */
  executionIds?: Ids;
  logger: Logger;
  /** The agent's --sandbox-name, recorded on schedules and executions. */
  sandbox: string;
  /** Seals schedule env values at rest (absent: stored in clear, as in tests that need no key). */
  secrets?: SecretBox;
}

export interface Schedules {
  service: ScheduleService;
  scheduler: Scheduler;
  store: ScheduleStore;
}

/** Builds the schedules capability; call `scheduler.start()` once the runner is ready. */
export function createSchedules(options: SchedulesOptions): Schedules {
  const store = new ScheduleStore(options.db, options.secrets);
  const scheduler = new Scheduler({ ...options, ids: options.executionIds ?? uuidV7(options.clock), store });
  const service = new ScheduleService({ store, scheduler, clock: options.clock, ids: options.ids, sandbox: options.sandbox });
  return { service, scheduler, store };
}
