import type { Clock } from "../../src/clock.js";
import type { Logger } from "../../src/logging.js";
import { outcomeOf, tail, type ScheduleRunner } from "./runner.js";
import type { ExecutionPatch, ScheduleStore } from "./schedule-store.js";

export interface ScheduleInput {
  command: string;
  env?: Record<string, string>;
  keepAlive: boolean;
  name?: string;
  timeout: number;
  workingDir?: string;
}

/** An execution whose process has not ended yet. */
export interface Run {
  seq: number;
  id: string;
  scheduleId: string;
  processName: string;
  timeout: number;
}

export interface RunsOptions {
  store: ScheduleStore;
  runner: ScheduleRunner;
  clock: Clock;
  logger: Logger;
}

/**
 * The runs in progress, per schedule, and their life after the firing
 * transaction: start the process, watch it end, record the outcome.
 *
 * Kept in memory because every run starts here and a restart fails whatever
 * was left running, so this map is exactly the set of `running` records; the
 * overlap check then costs no query. The follow-up writes (accepted, ended)
 * are batched into one transaction per event-loop turn: a burst of 1,000
 * firings costs a few commits, not 2,000.
 */
export class Runs {
  readonly #o: RunsOptions;
  readonly #running = new Map<string, Map<number, Run>>();
  #pending: (() => void)[] = [];
  #flushing: NodeJS.Immediate | undefined;
  #stopped = false;

  constructor(options: RunsOptions) {
    this.#o = options;
  }

  of(scheduleId: string): Run[] {
    return [...(this.#running.get(scheduleId)?.values() ?? [])];
  }

  /** Registers a run recorded as running (inside the firing transaction). */
  add(run: Run): void {
    let runs = this.#running.get(run.scheduleId);
    if (!runs) this.#running.set(run.scheduleId, (runs = new Map()));
    runs.set(run.seq, run);
  }

  /**
   * Concurrency policy Replace: records the schedule's runs as failed (in the
   * caller's transaction) and returns them; once that commits, `kill` them.
   */
  replaceAll(scheduleId: string, now: number): Run[] {
    const runs = this.of(scheduleId);
    for (const run of runs) {
      this.#o.store.updateExecution(run.seq, { status: "failed", error: "replaced by a newer run (concurrencyPolicy Replace)", completed_at: now }, true);
    }
    return runs;
  }

  /** Forgets replaced runs and kills their processes (after the commit). */
  kill(runs: Run[]): void {
    for (const run of runs) {
      this.#forget(run);
      this.#o.runner
        .kill(run.processName)
        .catch((err: unknown) => this.#o.logger.warn({ err: (err as Error).message, executionId: run.id }, "could not kill a replaced run"));
    }
  }

  /** Starts the process; resolves once the runner accepted or refused it. */
  async launch(run: Run, input: ScheduleInput): Promise<void> {
    const { runner, clock, logger } = this.#o;
    try {
      // A scheduled run is killed at input.timeout whatever keepAlive says (documented): the kill timer is
      // explicit here, since a process's own timeout only bounds an HTTP caller's waits (reference §4.2).
      await runner.start({
        command: input.command,
        name: run.processName,
        workingDir: input.workingDir,
        env: input.env,
        timeout: input.timeout,
        killAfter: input.timeout,
        keepAlive: input.keepAlive,
      });
    } catch (err) {
      const status = (err as { status?: number }).status;
      this.#settle(run, {
        status: "failed",
        status_code: typeof status === "number" ? status : 500,
        error: `could not start the process: ${(err as Error).message}`,
        completed_at: clock.now(),
      });
      logger.warn({ scheduleId: run.scheduleId, executionId: run.id, err: (err as Error).message }, "scheduled run failed to start");
      return;
    }
    this.#defer(() => this.#o.store.updateExecution(run.seq, { status_code: 200 }));
    void this.#watch(run);
  }

  async #watch(run: Run): Promise<void> {
    const { runner, clock, logger } = this.#o;
    try {
      const process = await runner.waitForExit(run.processName);
      const output = await runner.logs(run.processName).then(
        (l) => tail(l.logs),
        () => "",
      );
      const outcome = outcomeOf(process, run.timeout);
      this.#settle(run, { status: outcome.status, exit_code: outcome.exitCode, error: outcome.error, output, completed_at: clock.now() });
      logger.info({ scheduleId: run.scheduleId, executionId: run.id, status: outcome.status, exitCode: outcome.exitCode }, "scheduled run finished");
    } catch (err) {
      if (this.#stopped) return; // the agent is closing: the next start marks it "agent restarted"
      this.#settle(run, { status: "failed", error: `lost track of the process: ${(err as Error).message}`, completed_at: clock.now() });
    }
  }

  /** Records how a run ended, unless it was already settled (replaced, or failed at start-up). */
  #settle(run: Run, patch: ExecutionPatch): void {
    if (this.#stopped) return;
    this.#forget(run);
    this.#defer(() => this.#o.store.updateExecution(run.seq, patch, true));
  }

  #forget(run: Run): void {
    const runs = this.#running.get(run.scheduleId);
    runs?.delete(run.seq);
    if (runs?.size === 0) this.#running.delete(run.scheduleId);
  }

  #defer(write: () => void): void {
    if (this.#stopped) return;
    this.#pending.push(write);
    this.#flushing ??= setImmediate(() => this.flush());
  }

  /** Writes the batched follow-ups now, in one transaction. */
  flush(): void {
    if (this.#flushing) clearImmediate(this.#flushing);
    this.#flushing = undefined;
    const writes = this.#pending;
    this.#pending = [];
    if (writes.length === 0) return;
    try {
      this.#o.store.transaction(() => {
        for (const write of writes) write();
      });
    } catch (err) {
      this.#o.logger.error({ err }, "recording run outcomes failed");
    }
  }

  /** Flushes what is pending, then ignores whatever the runner reports later. */
  stop(): void {
    this.flush();
    this.#stopped = true;
  }
}
