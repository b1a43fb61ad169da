/**
 * A job execution's life, computed from its plan and the clock (pure, no
 * timers): queued → pending → running → succeeded | failed | timeout, or
 * cancelling → cancelled after a cancel. Tasks run `parallelism` at a time;
 * each takes `durationMs` (1 s unless the task says otherwise) so a cancel
 * can be observed. On cancel, tasks already running finish; none start.
 */
export type ExecutionStatus = "queued" | "pending" | "running" | "cancelling" | "cancelled" | "failed" | "succeeded" | "timeout";
export type TaskStatus = "pending" | "running" | "succeeded" | "failed" | "cancelled";

export interface TaskPlan {
  durationMs: number;
  fail: boolean;
}

export interface ExecutionPlan {
  createdMs: number;
  tasks: TaskPlan[];
  parallelism: number;
  /** Per-task limit; a task running longer ends as timed out (0 = none). */
  timeoutMs: number;
  cancelMs?: number;
}

export const QUEUED_MS = 250;
export const PENDING_MS = 500;
export const DEFAULT_TASK_MS = 1000;

export interface TaskState {
  index: number;
  status: TaskStatus;
  startMs?: number;
  endMs?: number;
  timedOut: boolean;
}

export interface ExecutionState {
  status: ExecutionStatus;
  startedMs?: number;
  completedMs?: number;
  tasks: TaskState[];
  stats: { total: number; running: number; success: number; failure: number; cancelled: number; retried: number };
}

/** When each task would start and end if nothing were cancelled. */
function schedule(plan: ExecutionPlan): { startMs: number; endMs: number; timedOut: boolean }[] {
  const slots = Array.from({ length: Math.max(1, plan.parallelism) }, () => plan.createdMs + PENDING_MS);
  return plan.tasks.map((task) => {
    let slot = 0;
    for (let i = 1; i < slots.length; i++) if (slots[i]! < slots[slot]!) slot = i;
    const startMs = slots[slot]!;
    const timedOut = plan.timeoutMs > 0 && task.durationMs > plan.timeoutMs;
    const endMs = startMs + (timedOut ? plan.timeoutMs : task.durationMs);
    slots[slot] = endMs;
    return { startMs, endMs, timedOut };
  });
}

export function stateAt(plan: ExecutionPlan, nowMs: number): ExecutionState {
  const times = schedule(plan);
  const cancel = plan.cancelMs;
  const tasks: TaskState[] = times.map((t, index) => {
    if (cancel !== undefined && t.startMs > cancel) return { index, status: cancel <= nowMs ? "cancelled" : "pending", timedOut: false };
    if (nowMs < t.startMs) return { index, status: "pending", timedOut: false };
    if (nowMs < t.endMs) return { index, status: "running", startMs: t.startMs, timedOut: false };
    return { index, status: plan.tasks[index]!.fail || t.timedOut ? "failed" : "succeeded", startMs: t.startMs, endMs: t.endMs, timedOut: t.timedOut };
  });
  const stats = {
    total: tasks.length,
    running: tasks.filter((t) => t.status === "running").length,
    success: tasks.filter((t) => t.status === "succeeded").length,
    failure: tasks.filter((t) => t.status === "failed").length,
    cancelled: tasks.filter((t) => t.status === "cancelled").length,
    retried: 0,
  };
  const startedMs = plan.createdMs + PENDING_MS;
  const done = tasks.every((t) => t.status !== "pending" && t.status !== "running");
  const completedMs = done ? Math.max(startedMs, cancel ?? 0, ...tasks.map((t) => t.endMs ?? 0)) : undefined;
  let status: ExecutionStatus;
  if (cancel !== undefined && cancel <= nowMs) status = done ? "cancelled" : "cancelling";
  else if (nowMs < plan.createdMs + QUEUED_MS) status = "queued";
  else if (nowMs < startedMs) status = "pending";
  else if (!done) status = "running";
  else if (tasks.some((t) => t.timedOut)) status = "timeout";
  else status = stats.failure > 0 ? "failed" : "succeeded";
  return { status, startedMs: nowMs >= startedMs ? startedMs : undefined, completedMs, tasks, stats };
}

export const TERMINAL: readonly ExecutionStatus[] = ["cancelled", "failed", "succeeded", "timeout"];
