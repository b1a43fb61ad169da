import type { Clock, Timer } from "../../src/clock.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import { decideOverlap, nextDueAfterFire, type ConcurrencyPolicy } from "./due.js";
import { DueQueue } from "./due-queue.js";
import type { ScheduleRunner } from "./runner.js";
import { Runs, type Run, type ScheduleInput } from "./runs.js";
import type { ExecutionRow, ExecutionTrigger, NewExecution, ScheduleRow, ScheduleStore } from "./schedule-store.js";

export type { ScheduleInput } from "./runs.js";

export interface SchedulerOptions {
  store: ScheduleStore;
  runner: ScheduleRunner;
  clock: Clock;
  /** Execution ids. */
  ids: Ids;
  logger: Logger;
  sandbox: string;
}

/**
 * Longest the single timer sleeps. Waking this often costs nothing, keeps
 * every setTimeout far below the 24.8-day overflow, and notices wall-clock
 * jumps (suspend, NTP steps) within this bound, as croner does.
 */
export const HEARTBEAT_MS = 30_000;
/**
 * A due time that passed before the scheduler started (agent down), or that
 * is noticed later than this (blocked loop, clock jump), was missed: the run
 * is recorded with trigger "catch-up".
 */
export const CATCH_UP_AFTER_MS = 60_000;
/** A firing transaction that failed (disk full, I/O error) is retried after this. */
export const FIRE_RETRY_MS = 5_000;

/**
 * The engine: one timer for the earliest due schedule over a DueQueue of all
 * of them. Everything due is fired in one SQLite transaction that records each
 * execution (with retention) and advances each schedule, so an occurrence is
 * recorded exactly once even if the agent dies right after; processes start
 * after the commit.
 */
export class Scheduler {
  readonly #o: SchedulerOptions;
  readonly #queue = new DueQueue();
  /** The armed schedules' rows, so firing reads no schedule from disk. */
  readonly #armed = new Map<string, { row: ScheduleRow; readonly input: ScheduleInput }>();
  #timer: Timer | undefined;
  #wakeAt = 0;
  #startedAt = 0;
  #stopped = true;
  readonly #runs: Runs;

  constructor(options: SchedulerOptions) {
    this.#o = options;
    this.#runs = new Runs(options);
  }

  /** Marks runs a dead agent left behind, loads every armed schedule, fires what is overdue. */
  start(): void {
    const { store, clock, logger } = this.#o;
    const failed = store.failRunning("agent restarted", clock.now());
    if (failed > 0) logger.warn({ executions: failed }, "executions left running by a previous agent marked failed");
    for (const row of store.armedSchedules()) this.#track(row);
    this.#stopped = false;
    this.#startedAt = clock.now();
    logger.info({ schedules: this.#queue.size }, "scheduler started");
    this.#tick();
  }

  stop(): void {
    this.#runs.stop();
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  get armedCount(): number {
    return this.#queue.size;
  }

  /** (Re)arms a schedule as stored (created or replaced); a null next_due_at disarms it. */
  track(row: ScheduleRow): void {
    this.#track(row);
    this.#arm();
  }

  untrack(id: string): void {
    this.#armed.delete(id);
    this.#queue.set(id, null);
    this.#arm();
  }

  #track(row: ScheduleRow): void {
    if (row.next_due_at === null) {
      this.#armed.delete(row.id);
      this.#queue.set(row.id, null);
      return;
    }
    this.#armed.set(row.id, { row, input: JSON.parse(row.input) as ScheduleInput });
    this.#queue.set(row.id, row.next_due_at);
  }

  /** Runs in progress for a schedule (the overlap check). */
  running(scheduleId: string): Run[] {
    return this.#runs.of(scheduleId);
  }

  /** Starts a run now (POST /schedules/{id}/run); the caller checked overlap. */
  async runNow(schedule: ScheduleRow): Promise<ExecutionRow> {
    const now = this.#o.clock.now();
    const input = JSON.parse(schedule.input) as ScheduleInput;
    const execution = this.#newExecution(schedule, input, "manual", null, now, "running");
    let replaced: Run[] = [];
    const run = this.#o.store.transaction(() => {
      if (schedule.concurrency_policy === "Replace") replaced = this.#runs.replaceAll(schedule.id, now);
      return this.#record(execution, schedule.max_executions)!;
    });
    this.#runs.add(run);
    this.#runs.kill(replaced);
    await this.#runs.launch(run, input);
    this.#runs.flush();
    return this.#o.store.getExecution(run.seq) ?? { seq: run.seq, ...execution };
  }

  #arm(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    if (this.#stopped) return;
    const next = this.#queue.peek();
    if (next === undefined) return;
    const now = this.#o.clock.now();
    const delay = Math.min(Math.max(0, next - now), HEARTBEAT_MS);
    this.#wakeAt = now + delay;
    this.#timer = this.#o.clock.setTimer(delay, () => this.#tick());
  }

  #tick(): void {
    if (this.#stopped) return;
    const now = this.#o.clock.now();
    if (this.#wakeAt && Math.abs(now - this.#wakeAt) > 5_000) {
      this.#o.logger.warn({ expected: new Date(this.#wakeAt).toISOString(), now: new Date(now).toISOString() }, "wall clock jumped; re-arming");
    }
    const due = this.#queue.popDue(now);
    if (due.length > 0) {
      try {
        this.#fire(
          due.map((d) => d.id),
          now,
        );
      } catch (err) {
        // Nothing was recorded (the transaction rolled back): try again shortly.
        this.#o.logger.error({ err, schedules: due.length }, "firing schedules failed; retrying in 5 s");
        for (const { id } of due) if (this.#armed.has(id)) this.#queue.set(id, now + FIRE_RETRY_MS);
      }
    }
    this.#arm();
  }

  /** Fires the given schedules at their stored due times (a retry may wake later than that). */
  #fire(ids: string[], now: number): void {
    const { store } = this.#o;
    const launches: { run: Run; input: ScheduleInput }[] = [];
    const kills: Run[] = [];
    const rearm: { id: string; next: number | null; at: number }[] = [];
    const logFires = this.#o.logger.isLevelEnabled("info");
    store.transaction(() => {
      for (const id of ids) {
        const armed = this.#armed.get(id);
        const at = armed?.row.next_due_at;
        if (!armed || at === null || at === undefined) continue;
        const { row: schedule, input } = armed;
        const trigger: ExecutionTrigger = at < this.#startedAt || now - at > CATCH_UP_AFTER_MS ? "catch-up" : "schedule";
        const decision = decideOverlap(schedule.concurrency_policy as ConcurrencyPolicy, this.#runs.of(id).length);
        const execution = this.#newExecution(schedule, input, trigger, at, now, decision === "skip" ? "skipped" : "running");
        if (decision === "replace") kills.push(...this.#runs.replaceAll(id, now));
        const run = this.#record(execution, schedule.max_executions);
        const next = nextDueAfterFire(schedule, at, now);
        // A one-off is done: deleted from the schedules, as the platform does once it fired; its execution stays.
        if (next === null) store.retire(id, now, at);
        else store.setDue(id, next, at);
        rearm.push({ id, next, at });
        if (run) launches.push({ run, input });
        if (logFires)
          this.#o.logger.info(
            { scheduleId: id, executionId: execution.id, trigger, status: execution.status, dueAt: new Date(at).toISOString() },
            "schedule fired",
          );
      }
    });
    // Committed: now the in-memory state may follow.
    for (const { run } of launches) this.#runs.add(run);
    for (const { id, next, at } of rearm) {
      const armed = this.#armed.get(id)!;
      armed.row = { ...armed.row, next_due_at: next, last_due_at: at };
      if (next === null) this.#armed.delete(id);
      this.#queue.set(id, next);
    }
    this.#runs.kill(kills);
    for (const { run, input } of launches) void this.#runs.launch(run, input);
  }

  #newExecution(
    schedule: ScheduleRow,
    input: ScheduleInput,
    trigger: ExecutionTrigger,
    dueAt: number | null,
    now: number,
    status: "running" | "skipped",
  ): NewExecution {
    const id = this.#o.ids();
    const skipped = status === "skipped";
    return {
      id,
      schedule_id: schedule.id,
      sandbox: this.#o.sandbox,
      trigger,
      due_at: dueAt,
      created_at: now,
      executed_at: skipped ? null : now,
      completed_at: skipped ? now : null,
      status,
      status_code: null,
      exit_code: null,
      process_name: skipped ? null : `${input.name || `schedule-${schedule.id}`}-${id}`,
      timeout: input.timeout,
      error: skipped ? "overlap: the previous run is still running (concurrencyPolicy Forbid)" : "",
      output: "",
    };
  }

  /** Records an execution (in the caller's transaction); a running one is returned as a Run to add once committed. */
  #record(execution: NewExecution, maxExecutions: number): Run | undefined {
    const seq = this.#o.store.recordExecution(execution, maxExecutions);
    if (execution.status !== "running") return undefined;
    return { seq, id: execution.id, scheduleId: execution.schedule_id, processName: execution.process_name!, timeout: execution.timeout };
  }
}
