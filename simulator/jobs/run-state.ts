import { stateAt, type ExecutionPlan, type ExecutionState, type ExecutionStatus, type TaskState, type TaskStatus } from "./plan.js";

/**
 * What actually ran, for an execution whose job has a command and a launcher
 * to run it (simulator/jobs/runner.ts): per task its status, attempts, exit
 * code, output and times, written by the runner as they happen. Without one
 * (records only: openSimulator without agents, or a job with no command) the
 * execution follows its simulated plan (plan.ts).
 */
export interface RunTask {
  index: number;
  status: TaskStatus;
  /** Attempts started so far (1 + retries). */
  attempts: number;
  startMs?: number;
  endMs?: number;
  exitCode?: number;
  timedOut?: boolean;
  /** Why the last attempt did not succeed (exit code, timeout, start failure). */
  error?: string;
  /** Output of the last attempt, capped (OUTPUT_BYTES per stream). */
  stdout?: string;
  stderr?: string;
}

export interface RunRecord {
  /** BL_EXECUTION_DATA_URL's secret part: the task data is served without credentials, as blStartJob fetches it. */
  dataToken: string;
  command: string;
  maxRetries: number;
  /** Who created the execution: its tasks call the control plane as them (BL_API_KEY). */
  by: { sub: string; type: "user" | "service_account"; scopes: string[] };
  startedMs?: number;
  tasks: RunTask[];
}

export interface RunDoc {
  __plan: ExecutionPlan;
  __run?: RunRecord;
}

export const OUTPUT_BYTES = 64 * 1024;

export function newRunTasks(count: number): RunTask[] {
  return Array.from({ length: count }, (_, index) => ({ index, status: "pending", attempts: 0 }));
}

const ENDED: readonly TaskStatus[] = ["succeeded", "failed", "cancelled"];

/** The state of an execution that ran for real: its status follows its tasks. */
export function runState(plan: ExecutionPlan, run: RunRecord): ExecutionState {
  const tasks: TaskState[] = run.tasks.map((t) => ({ index: t.index, status: t.status, startMs: t.startMs, endMs: t.endMs, timedOut: t.timedOut === true }));
  const count = (status: TaskStatus) => tasks.filter((t) => t.status === status).length;
  const stats = {
    total: tasks.length,
    running: count("running"),
    success: count("succeeded"),
    failure: count("failed"),
    cancelled: count("cancelled"),
    retried: run.tasks.reduce((n, t) => n + Math.max(0, t.attempts - 1), 0),
  };
  const done = tasks.every((t) => ENDED.includes(t.status));
  const completedMs = done ? Math.max(run.startedMs ?? plan.createdMs, plan.cancelMs ?? 0, ...tasks.map((t) => t.endMs ?? 0)) : undefined;
  let status: ExecutionStatus;
  if (plan.cancelMs !== undefined) status = done ? "cancelled" : "cancelling";
  else if (run.startedMs === undefined) status = "queued";
  else if (!done) status = tasks.some((t) => t.status !== "pending") ? "running" : "pending";
  else if (run.tasks.some((t) => t.status === "failed" && t.timedOut)) status = "timeout";
  else status = stats.failure > 0 ? "failed" : "succeeded";
  return { status, startedMs: run.startedMs, completedMs, tasks, stats };
}

/** An execution's state now: what ran, or its simulated plan. */
export function executionState(doc: RunDoc, nowMs: number): ExecutionState {
  return doc.__run ? runState(doc.__plan, doc.__run) : stateAt(doc.__plan, nowMs);
}

/** Keeps the last `max` bytes of a stream's output (the end says why it failed). */
export function tail(text: string | null | undefined, max = OUTPUT_BYTES): string {
  if (!text) return "";
  const bytes = Buffer.from(text);
  return bytes.length <= max ? text : bytes.subarray(bytes.length - max).toString("utf8");
}

const quote = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);

/**
 * The job's command as one shell line, from spec.runtime.command (a shell
 * line, or an argv array) and spec.runtime.args (appended, quoted); undefined
 * when the job names none (its executions are then records only).
 */
export function jobCommand(runtime: { command?: unknown; args?: unknown }): string | undefined {
  const words = (value: unknown): string[] => (Array.isArray(value) ? value.filter((w): w is string => typeof w === "string") : []);
  const args = words(runtime.args).map(quote);
  if (typeof runtime.command === "string" && runtime.command.trim()) return [runtime.command, ...args].join(" ");
  const argv = words(runtime.command);
  return argv.length > 0 ? [...argv.map(quote), ...args].join(" ") : undefined;
}
