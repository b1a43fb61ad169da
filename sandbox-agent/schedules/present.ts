import type { ScheduleInput } from "./scheduler.js";
import type { ExecutionRow, ScheduleRow } from "./schedule-store.js";

/** The wire shapes: supersets of @blaxel/core's SandboxScheduleEntry and SandboxScheduleExecution. */
export const MASK = "***";

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
const isoAlways = (ms: number): string => new Date(ms).toISOString();

/** `input.env` values become "***" unless the caller proved it may see them. */
export function maskEnv(env: Record<string, string> | undefined, showSecrets: boolean): Record<string, string> | undefined {
  if (!env || showSecrets) return env;
  return Object.fromEntries(Object.keys(env).map((k) => [k, MASK]));
}

export function presentSchedule(row: ScheduleRow, showSecrets: boolean) {
  const input = JSON.parse(row.input) as ScheduleInput;
  return {
    id: row.id,
    sandbox: row.sandbox,
    createdAt: isoAlways(row.created_at),
    updatedAt: isoAlways(row.updated_at),
    type: row.type,
    value: row.value,
    timezone: row.timezone,
    concurrencyPolicy: row.concurrency_policy,
    maxExecutions: row.max_executions,
    input: {
      command: input.command,
      env: maskEnv(input.env, showSecrets) ?? {},
      keepAlive: input.keepAlive,
      name: input.name ?? "",
      timeout: input.timeout,
      workingDir: input.workingDir ?? "",
    },
    /** A one-off `at` that fired is deleted (its executions stay listable), so every schedule shown is active. */
    status: "active",
    nextRunAt: iso(row.next_due_at),
    lastRunAt: iso(row.last_due_at),
  };
}

export function presentExecution(row: ExecutionRow) {
  return {
    id: row.id,
    scheduleId: row.schedule_id,
    sandbox: row.sandbox,
    createdAt: isoAlways(row.created_at),
    /** When the command was submitted to the process runner; absent when skipped (the SDK types it string | undefined). */
    executedAt: row.executed_at === null ? undefined : isoAlways(row.executed_at),
    completedAt: iso(row.completed_at),
    status: row.status,
    /** As the control plane reports it: 200 once the runner accepted the command. */
    statusCode: row.status_code ?? 0,
    exitCode: row.exit_code,
    processName: row.process_name ?? "",
    timeout: row.timeout,
    error: row.error,
    output: row.output,
    trigger: row.trigger,
    dueAt: iso(row.due_at),
  };
}
