import type { Clock } from "../../src/clock.js";
import { errors } from "../../src/errors.js";
import type { Ids } from "../../src/ids.js";
import { decideOverlap, firstDueAt } from "./due.js";
import type { ScheduleBody } from "./definition.js";
import { MASK } from "./present.js";
import type { Scheduler, ScheduleInput } from "./scheduler.js";
import type { ExecutionRow, ExecutionStatus, ListQuery, ScheduleRow, ScheduleStore } from "./schedule-store.js";
import { resolveTiming, TimingError } from "./timing.js";
import { canonicalTimeZone, isValidTimeZone } from "./timezone.js";

export interface ScheduleServiceOptions {
  store: ScheduleStore;
  scheduler: Scheduler;
  clock: Clock;
  ids: Ids;
  sandbox: string;
}

/** The schedules API behind the routes: validation beyond the schema, 404/409, arming. */
export class ScheduleService {
  readonly #o: ScheduleServiceOptions;

  constructor(options: ScheduleServiceOptions) {
    this.#o = options;
  }

  create(body: ScheduleBody): ScheduleRow {
    const now = this.#o.clock.now();
    const id = body.id ?? this.#o.ids();
    const definition = this.#define(body, now);
    const row: Omit<ScheduleRow, "seq"> = { id, sandbox: this.#o.sandbox, created_at: now, updated_at: now, last_due_at: null, ...definition };
    this.#o.store.transaction(() => {
      if (this.#o.store.getSchedule(id)) throw errors.conflict(`schedule "${id}" already exists`);
      this.#o.store.insertSchedule(row);
    });
    const created = this.get(id);
    this.#o.scheduler.track(created);
    return created;
  }

  /** PUT: replaces type, value, timezone, policy, input and maxExecutions; history is kept (trimmed to the new limit). */
  replace(id: string, body: ScheduleBody): ScheduleRow {
    if (body.id !== undefined && body.id !== id) throw errors.badRequest(`body.id: "${body.id}" does not match the schedule in the URL ("${id}")`);
    const existing = this.get(id);
    const now = this.#o.clock.now();
    // Read-modify-write: an env value sent back masked ("***") keeps the stored one (the README's promise).
    const stored = (JSON.parse(existing.input) as ScheduleInput).env ?? {};
    const env = body.input.env && Object.fromEntries(Object.entries(body.input.env).map(([k, v]) => [k, v === MASK && k in stored ? stored[k]! : v]));
    const definition = this.#define({ ...body, input: { ...body.input, env } }, now);
    this.#o.store.replaceSchedule({ id, updated_at: now, last_due_at: existing.last_due_at, ...definition });
    const replaced = this.get(id);
    this.#o.scheduler.track(replaced);
    return replaced;
  }

  delete(id: string): ScheduleRow {
    const row = this.#o.store.deleteSchedule(id);
    if (!row) throw errors.notFound(`schedule "${id}" not found`);
    this.#o.scheduler.untrack(id);
    return row;
  }

  get(id: string): ScheduleRow {
    const row = this.#o.store.getSchedule(id);
    if (!row) throw errors.notFound(`schedule "${id}" not found`);
    return row;
  }

  /** The id of a schedule whose history may be read: a live one, or a one-off deleted once it fired. 404 otherwise. */
  withHistory(id: string): string {
    if (this.#o.store.getSchedule(id) || this.#o.store.isRetired(id)) return id;
    throw errors.notFound(`schedule "${id}" not found`);
  }

  list(filter: { type?: "cron" | "at" }, q: ListQuery) {
    return this.#o.store.listSchedules(filter, q);
  }

  executions(filter: { scheduleId?: string; status?: ExecutionStatus }, q: ListQuery) {
    return this.#o.store.listExecutions({ schedule_id: filter.scheduleId, status: filter.status }, q);
  }

  /** Run now; obeys concurrencyPolicy, so under Forbid a run in progress is a 409. */
  async runNow(id: string): Promise<ExecutionRow> {
    const schedule = this.get(id);
    const running = this.#o.scheduler.running(id);
    if (decideOverlap(schedule.concurrency_policy, running.length) === "skip") {
      throw errors.conflict(`schedule "${id}" has a run in progress (execution ${running[0]!.id}) and its concurrencyPolicy is Forbid`);
    }
    return this.#o.scheduler.runNow(schedule);
  }

  #define(body: ScheduleBody, now: number) {
    const timezone = body.timezone ?? "UTC";
    if (!isValidTimeZone(timezone)) throw errors.badRequest(`body.timezone: "${timezone}" is not an IANA time zone (e.g. "Europe/Paris", "UTC")`);
    const zone = canonicalTimeZone(timezone);
    let timing;
    try {
      timing = resolveTiming(body.type, body.value, zone, now);
    } catch (e) {
      if (e instanceof TimingError) throw errors.badRequest(`body.value: ${e.message}`);
      throw e;
    }
    const nextDue = firstDueAt({ ...timing, timezone: zone }, now);
    if (nextDue === null) throw errors.badRequest(`body.value: "${body.value}" never fires`);
    const input: ScheduleInput = {
      command: body.input.command,
      env: body.input.env,
      keepAlive: body.input.keepAlive,
      name: body.input.name,
      timeout: body.input.timeout,
      workingDir: body.input.workingDir,
    };
    return {
      type: timing.type,
      value: timing.value,
      timezone: zone,
      concurrency_policy: body.concurrencyPolicy,
      input: JSON.stringify(input),
      max_executions: body.maxExecutions,
      next_due_at: nextDue,
    };
  }
}
