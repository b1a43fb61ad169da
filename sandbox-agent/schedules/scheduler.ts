import type { Clock, Timer } from "../../src/clock.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import { decideOverlap, nextDueAfterFire, type ConcurrencyPolicy } from "./due.js";
import { DueQueue } from "./due-queue.js";
import { outcomeOf, tail, type ScheduleRunner } from "./runner.js";
import type { ExecutionRow, ExecutionTrigger, NewExecution, ScheduleRow, ScheduleStore } from "./store.js";

export interface ScheduleInput {
  command: string;
  env?: Record<string, string>;
  keepAlive: boolean;
  name?: string;
  timeout: number;
  workingDir?: string;
}

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

  constructor(options: SchedulerOptions) {
    this.#o = options;
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

  /** Starts a run now (POST /schedules/{id}/run); the caller checked overlap. */
  async runNow(schedule: ScheduleRow): Promise<ExecutionRow> {
    const now = this.#o.clock.now();
    const running = this.#o.store.runningExecutions(schedule.id);
    const input = JSON.parse(schedule.input) as ScheduleInput;
    const execution = this.#newExecution(schedule, input, "manual", null, now, "running");
    this.#o.store.transaction(() => {
      if (schedule.concurrency_policy === "Replace") this.#markReplaced(running, now);
      this.#o.store.recordExecution(execution, schedule.max_executions);
    });
    if (schedule.concurrency_policy === "Replace") this.#killAll(running);
    await this.#launch(execution, input);
    return this.#o.store.getExecution(execution.id) ?? { seq: 0, ...execution };
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
        this.#fire(due, now);
      } catch (err) {
        this.#o.logger.error({ err }, "firing schedules failed");
      }
    }
    this.#arm();
  }

  #fire(due: { id: string; at: number }[], now: number): void {
    const { store } = this.#o;
    const launches: { execution: NewExecution; input: ScheduleInput }[] = [];
    const kills: ExecutionRow[] = [];
    const rearm: { id: string; next: number | null }[] = [];
    const logFires = this.#o.logger.isLevelEnabled("info");
    store.transaction(() => {
      for (const { id, at } of due) {
        const armed = this.#armed.get(id);
        if (!armed || armed.row.next_due_at !== at) continue;
        const { row: schedule, input } = armed;
        const trigger: ExecutionTrigger =  at < this.#startedAt || now - at > CATCH_UP_AFTER_MS ? "catch-up" : "schedule";
        const running = store.runningExecutions(id);
        const decision = decideOverlap(schedule.concurrency_policy as ConcurrencyPolicy, running.length);
        const execution = this.#newExecution(schedule, input, trigger, at, now, decision === "skip" ? "skipped" : "running");
        if (decision === "replace") {
          this.#markReplaced(running, now);
          kills.push(...running);
        }
        store.recordExecution(execution, schedule.max_executions);
        const next = nextDueAfterFire(schedule, at, now);
        store.setDue(id, next, at);
        rearm.push({ id, next });
        if (decision !== "skip") launches.push({ execution, input });
        if (logFires) this.#o.logger.info({ scheduleId: id, executionId: execution.id, trigger, status: execution.status, dueAt: new Date(at).toISOString() }, "schedule fired");
      }
    });
    for (const { id, next } of rearm) {
      const armed = this.#armed.get(id)!;
      armed.row = { ...armed.row, next_due_at: next, last_due_at: armed.row.next_due_at };
      if (next === null) this.#armed.delete(id);
      this.#queue.set(id, next);
    }
    this.#killAll(kills);
    for (const { execution, input } of launches) void this.#launch(execution, input);
  }

  #newExecution(schedule: ScheduleRow, input: ScheduleInput, trigger: ExecutionTrigger, dueAt: number | null, now: number, status: "running" | "skipped"): NewExecution {
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

  #markReplaced(running: ExecutionRow[], now: number): void {
    for (const old of running) {
      this.#o.store.updateExecution(old.id, { status: "failed", error: "replaced by a newer run (concurrencyPolicy Replace)", completed_at: now }, true);
    }
  }

  #killAll(executions: ExecutionRow[]): void {
    for (const old of executions) {
      if (!old.process_name) continue;
      this.#o.runner.kill(old.process_name).catch((err: unknown) => this.#o.logger.warn({ err, executionId: old.id }, "could not kill replaced run"));
    }
  }

  async #launch(execution: NewExecution, input: ScheduleInput): Promise<void> {
    const { runner, store, clock, logger } = this.#o;
    const name = execution.process_name!;
    try {
      await runner.start({ command: input.command, name, workingDir: input.workingDir, env: input.env, timeout: input.timeout, keepAlive: input.keepAlive });
    } catch (err) {
      if (this.#stopped) return;
      const status = (err as { status?: number }).status;
      store.updateExecution(execution.id, { status: "failed", status_code: typeof status === "number" ? status : 500, error: `could not start the process: ${(err as Error).message}`, completed_at: clock.now() }, true);
      logger.warn({ scheduleId: execution.schedule_id, executionId: execution.id, err: (err as Error).message }, "scheduled run failed to start");
      return;
    }
    if (this.#stopped) return;
    store.updateExecution(execution.id, { status_code: 200 });
    void this.#watch(execution, name);
  }

  async #watch(execution: NewExecution, name: string): Promise<void> {
    const { runner, store, clock, logger } = this.#o;
    try {
      const process = await runner.waitForExit(name);
      const output = await runner.logs(name).then((l) => tail(l.logs), () => "");
      if (this.#stopped) return;
      const outcome = outcomeOf(process, execution.timeout);
      store.updateExecution(execution.id, { status: outcome.status, exit_code: outcome.exitCode, error: outcome.error, output, completed_at: clock.now() }, true);
      logger.info({ scheduleId: execution.schedule_id, executionId: execution.id, status: outcome.status, exitCode: outcome.exitCode }, "scheduled run finished");
    } catch (err) {
      if (this.#stopped) return;
      store.updateExecution(execution.id, { status: "failed", error: `lost track of the process: ${(err as Error).message}`, completed_at: clock.now() }, true);
    }
  }
}
