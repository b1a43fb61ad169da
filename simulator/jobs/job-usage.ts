import { recordSpan } from "../metrics/record.js";
import type { ResourceDoc } from "../resources/kind.js";
import { DEFAULT_MEMORY_MB, refOf } from "../resources/resource-usage.js";
import type { ResourceStore, StoredResource } from "../store/resources.js";
import { TERMINAL, type ExecutionPlan, type ExecutionState } from "./plan.js";
import { executionState, type RunRecord } from "./run-state.js";
import type { AccountStore } from "../store/accounts.js";
import type { UsageStore } from "../metrics/usage-store.js";

export const JOB_COMPUTE = "job_compute_runtime_gbs";
const EXECUTION_KIND = "job-execution";

/** The part of an execution document usage needs. */
export interface MeteredExecution {
  job: string;
  memory?: number;
  __plan: ExecutionPlan;
  /** What actually ran (jobs/runner.ts), when the execution ran for real. */
  __run?: RunRecord;
  /** Set once the execution's usage is recorded (it is recorded once, when it ends). */
  __metered?: boolean;
}

/**
 * Records an ended execution's compute once: each task that ran, from its
 * start to its end, × the execution's memory (its override, else the job's
 * runtime memory, else 2048 MB). Tasks running side by side each count, as
 * they would on the real service. Spans go straight to the store (not the
 * meter): a job's concurrent executions would share one meter span.
 * Returns whether the document changed (the caller saves it).
 */
export function meterExecution(
  deps: { resources: ResourceStore; usage: UsageStore },
  workspace: string,
  doc: MeteredExecution,
  state: ExecutionState,
): boolean {
  if (doc.__metered || !TERMINAL.includes(state.status)) return false;
  doc.__metered = true;
  const job = deps.resources.get<ResourceDoc>(workspace, "job", doc.job);
  if (!job) return true;
  const jobMemory = (job.doc.spec?.runtime as { memory?: number } | undefined)?.memory;
  const gb = (doc.memory ?? jobMemory ?? DEFAULT_MEMORY_MB) / 1024;
  const ref = refOf(job, "job");
  deps.usage.db.transaction(() => {
    for (const task of state.tasks)
      if (task.startMs !== undefined && task.endMs !== undefined) recordSpan(deps.usage, ref, JOB_COMPUTE, { from: task.startMs, to: task.endMs, gb });
  })();
  return true;
}

/**
 * Before a metrics query: executions that ended while nobody read them
 * (their stored status is still the one of their last read) are recorded now.
 */
export function settleJobUsage(deps: { resources: ResourceStore; usage: UsageStore; accounts: AccountStore }, now: number): void {
  for (const ws of deps.accounts.allWorkspaces()) {
    const open = deps.resources.list<MeteredExecution>({
      workspace: ws.name,
      kind: EXECUTION_KIND,
      parent: null,
      sort: "createdAt:asc",
      excludeStatuses: [...TERMINAL],
    });
    for (const item of open) settleExecution(deps, item, now);
  }
}

/** Brings a stored execution's status up to `now`, recording its usage if it ended; saves when anything changed. */
export function settleExecution(deps: { resources: ResourceStore; usage: UsageStore }, item: StoredResource<MeteredExecution>, now: number): ExecutionState {
  const state = executionState(item.doc, now);
  const metered = meterExecution(deps, item.workspace, item.doc, state);
  if (metered || state.status !== item.status) {
    item.status = state.status;
    deps.resources.update(item);
  }
  return state;
}
