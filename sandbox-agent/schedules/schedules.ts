import type { Clock } from "../../src/clock.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import type { Db } from "../../src/sqlite.js";
import type { ScheduleRunner } from "./runner.js";
import { Scheduler } from "./scheduler.js";
import { ScheduleService } from "./service.js";
import { ScheduleStore } from "./store.js";

export { SCHEDULE_MIGRATIONS } from "./store.js";
export type { ScheduleRunner } from "./runner.js";

export interface SchedulesOptions {
  /** Migrated with SCHEDULE_MIGRATIONS. */
  db: Db;
  runner: ScheduleRunner;
  clock: Clock;
  ids: Ids;
  logger: Logger;
  /** The agent's --sandbox-name, recorded on schedules and executions. */
  sandbox: string;
}

export interface Schedules {
  service: ScheduleService;
  scheduler: Scheduler;
  store: ScheduleStore;
}

/** Builds the schedules capability; call `scheduler.start()` once the runner is ready. */
export function createSchedules(options: SchedulesOptions): Schedules {
  const store = new ScheduleStore(options.db);
  const scheduler = new Scheduler({ ...options, store });
  const service = new ScheduleService({ store, scheduler, clock: options.clock, ids: options.ids, sandbox: options.sandbox });
  return { service, scheduler, store };
}
