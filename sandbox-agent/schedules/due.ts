import { nextCronFire, parseCron, type CronSpec } from "./cron.js";

/**
 * What is due, and when next: pure functions of a schedule's timing and the
 * current instant, so every rule below is unit-tested with a fake clock.
 *
 * Catch-up rule (systemd Persistent=true, and what node-cron, croner and cron
 * all do for a blocked process): a schedule found overdue — the agent was
 * down, the event loop was blocked, or the wall clock jumped forward — fires
 * ONCE, however many occurrences it missed; its next due time is then computed
 * from now. An `at` missed while down therefore fires once on start-up, and a
 * cron that missed N runs fires once.
 */
/** How a schedule is stored (timing.ts says what each means); defined here, below timing.ts, which builds on this file. */
export type ScheduleType = "cron" | "at";

export interface Timing {
  type: ScheduleType;
  value: string;
  timezone: string;
}

const specs = new Map<string, CronSpec>();

/** Parsed cron specs, shared by identical expressions (10,000 schedules often share a few). */
export function cronSpec(expression: string): CronSpec {
  let spec = specs.get(expression);
  if (!spec) {
    if (specs.size >= 5_000) specs.clear();
    spec = parseCron(expression);
    specs.set(expression, spec);
  }
  return spec;
}

/** When a schedule created (or replaced) at `now` is first due; null if never. */
export function firstDueAt(timing: Timing, now: number): number | null {
  if (timing.type === "at") return Date.parse(timing.value);
  return nextCronFire(cronSpec(timing.value), timing.timezone, now);
}

/**
 * After an occurrence due at `dueAt` fired at `now`: the next due time, or
 * null when the schedule is done (a one-off `at`). Occurrences between
 * `dueAt` and `now` are coalesced into the one that just fired.
 */
export function nextDueAfterFire(timing: Timing, dueAt: number, now: number): number | null {
  if (timing.type === "at") return null;
  return nextCronFire(cronSpec(timing.value), timing.timezone, Math.max(dueAt, now));
}

export type ConcurrencyPolicy = "Forbid" | "Allow" | "Replace";

export type OverlapDecision = "start" | "skip" | "replace";

/**
 * Kubernetes CronJob's concurrencyPolicy: with a previous run still running,
 * Forbid skips the new one (recorded as skipped, error "overlap"), Allow runs
 * both, Replace stops the old one and starts the new.
 */
export function decideOverlap(policy: ConcurrencyPolicy, runningCount: number): OverlapDecision {
  if (runningCount === 0 || policy === "Allow") return "start";
  return policy === "Forbid" ? "skip" : "replace";
}
