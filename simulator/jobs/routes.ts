import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { SCHEDULE_PAGE } from "../../src/pagination.js";
import { parseDuration } from "../../src/units.js";
import { toIso as iso } from "../../src/clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { insertChild, loadItem, showSecrets } from "../resources/crud.js";
import type { ResourceDoc } from "../resources/kind.js";
import { jobKind } from "../resources/kinds/workloads.js";
import { listResources } from "../resources/listing.js";
import { maskMap } from "../resources/render.js";
import type { StoredResource } from "../store/resources.js";
import { randomBytes } from "node:crypto";
import { DEFAULT_TASK_MS, TERMINAL, type ExecutionPlan } from "./plan.js";
import { executionState, jobCommand, newRunTasks, type RunRecord, type RunTask } from "./run-state.js";
import { settleExecution } from "./job-usage.js";
import type { ResourceStore } from "../store/resources.js";
import type { UsageStore } from "../metrics/usage-store.js";
import type { SimClock } from "../clock.js";
import type { CursorCodec } from "../../src/cursor.js";
import type { JobExecutor } from "./executor.js";
import type { Ids } from "../../src/ids.js";

/** What the execution routes use: the records, the clock, ids, list cursors, usage (settled executions) and the task runner. */
export interface JobRouteDeps {
  resources: ResourceStore;
  clock: SimClock;
  ids: Ids;
  cursors: CursorCodec;
  usage: UsageStore;
  jobs: JobExecutor;
}

/** Job executions: POST starts one, DELETE cancels (control-plane.md §3.5). */
export const EXECUTION_KIND = "job-execution";

const CreateBody = z.strictObject({
  allowQueue: z.boolean().optional(),
  env: z.record(z.string(), z.string()).optional(),
  executionId: z.string().optional(),
  id: z.string().optional(),
  jobId: z.string().optional(),
  memory: z.number().int().min(1).optional(),
  tasks: z.array(z.record(z.string(), z.unknown())).optional(),
  workspaceId: z.string().optional(),
});

interface ExecutionDoc {
  id: string;
  job: string;
  env: Record<string, string>;
  memory?: number;
  taskInputs: Record<string, unknown>[];
  __plan: ExecutionPlan;
  /** What actually ran, when the simulator runs jobs (a launcher, and a job with a command): jobs/runner.ts. */
  __run?: RunRecord;
  __metered?: boolean;
}

/** A task that ran: why it failed, as the platform's conditions say it. */
function conditionsOf(task: RunTask | undefined, timedOut: boolean) {
  if (timedOut)
    return [
      {
        type: "Completed",
        state: "False",
        reason: "Timeout",
        message: task?.error ?? "task exceeded the job timeout",
        severity: "error",
        executionReason: "timeout",
      },
    ];
  if (task?.status === "failed")
    return [{ type: "Completed", state: "False", reason: "Failed", message: task.error ?? "failed", severity: "error", executionReason: "error" }];
  return [];
}

/** The simulator's own field on a task that ran: what its last attempt did (the platform shows this in its logs). */
function resultOf(task: RunTask | undefined) {
  if (!task || task.attempts === 0) return undefined;
  return { attempts: task.attempts, exitCode: task.exitCode, error: task.error, stdout: task.stdout ?? "", stderr: task.stderr ?? "" };
}

/** A task's run time: `durationMs` (number) or `duration` ("30s", "2m") in its object, else 1 s; `fail: true` makes it fail. */
function taskPlan(task: Record<string, unknown>, index: number) {
  let durationMs = DEFAULT_TASK_MS;
  if (typeof task.durationMs === "number" && task.durationMs >= 0) durationMs = task.durationMs;
  else if (typeof task.duration === "string") {
    try {
      durationMs = parseDuration(task.duration);
    } catch (e) {
      throw errors.badRequest(`tasks[${index}].duration: ${(e as Error).message}`);
    }
  }
  return { durationMs, fail: task.fail === true };
}

function render(deps: JobRouteDeps, ctx: OpContext, item: StoredResource<ExecutionDoc>) {
  const doc = item.doc;
  const now = deps.clock.now();
  // Settles the stored status and, once it ended, records the execution's compute usage.
  const state = settleExecution(deps, item, now);
  const stamp = (ms?: number) => (ms === undefined ? undefined : iso(ms));
  const jobTimeout = doc.__plan.timeoutMs / 1000;
  const tasks = state.tasks.map((t) => ({
    metadata: {
      name: `${doc.id}-task-${t.index}`,
      createdAt: iso(doc.__plan.createdMs),
      scheduledAt: iso(doc.__plan.createdMs),
      startedAt: stamp(t.startMs),
      completedAt: stamp(t.endMs),
      updatedAt: stamp(t.endMs ?? t.startMs ?? doc.__plan.createdMs),
    },
    spec: { maxRetries: doc.__run?.maxRetries ?? 0, timeout: jobTimeout ? `${jobTimeout}s` : "0s" },
    status: t.status,
    conditions: conditionsOf(doc.__run?.tasks[t.index], t.timedOut),
    result: resultOf(doc.__run?.tasks[t.index]),
  }));
  return {
    metadata: {
      id: doc.id,
      job: doc.job,
      workspace: ctx.workspace,
      cluster: "sim-local",
      createdAt: iso(doc.__plan.createdMs),
      updatedAt: iso(now),
      startedAt: stamp(state.startedMs),
      completedAt: stamp(state.completedMs),
    },
    // Overridden env values are masked in responses (seed).
    spec: {
      envOverride: maskMap(doc.env, showSecrets(ctx)),
      memoryOverride: doc.memory,
      parallelism: doc.__plan.parallelism,
      tasks: doc.taskInputs,
      timeout: jobTimeout,
    },
    stats: state.stats,
    status: state.status,
    tasks,
  };
}

function loadExecution(deps: JobRouteDeps, ctx: OpContext): StoredResource<ExecutionDoc> {
  loadItem(deps, jobKind, ctx, ctx.params.jobId!, "");
  const item = deps.resources.get<ExecutionDoc>(ctx.workspace, EXECUTION_KIND, ctx.params.executionId!, ctx.params.jobId!);
  if (!item) throw errors.notFound(`execution "${ctx.params.executionId}" not found for job "${ctx.params.jobId}"`);
  return item;
}

export function jobExecutionOperations(deps: JobRouteDeps): Operation[] {
  return [
    {
      id: "listJobExecutions",
      method: "get",
      path: "/jobs/:jobId/executions",
      scope: "jobs:get",
      handler: (ctx) => {
        loadItem(deps, jobKind, ctx, ctx.params.jobId!, "");
        return listResources(
          deps,
          ctx,
          { kind: EXECUTION_KIND, parent: ctx.params.jobId!, shape: "versioned", limits: { ...SCHEDULE_PAGE, sorts: undefined } },
          (row) => render(deps, ctx, row as unknown as StoredResource<ExecutionDoc>),
        );
      },
    },
    {
      id: "createJobExecution",
      method: "post",
      path: "/jobs/:jobId/executions",
      scope: "jobs:update",
      handler: (ctx) => {
        const job = loadItem(deps, jobKind, ctx, ctx.params.jobId!, "");
        if (job.status === "DEACTIVATED" || job.status === "DEACTIVATING") throw errors.conflict(`job "${job.name}" is ${job.status}`);
        const body = parse(CreateBody, ctx.body ?? {}, "body");
        const runtime = ((job.doc as ResourceDoc).spec.runtime ?? {}) as {
          memory?: number;
          timeout?: number;
          maxConcurrentTasks?: number;
          maxRetries?: number;
          command?: unknown;
          args?: unknown;
        };
        if (body.memory !== undefined && runtime.memory !== undefined && body.memory > runtime.memory)
          throw errors.badRequest(`memory: at most the job's memory (${runtime.memory})`);
        const inputs = body.tasks?.length ? body.tasks : [{}];
        const id = body.executionId ?? body.id ?? deps.ids();
        const doc: ExecutionDoc = {
          id,
          job: job.name,
          env: body.env ?? {},
          memory: body.memory,
          taskInputs: inputs,
          __plan: {
            createdMs: deps.clock.now(),
            tasks: inputs.map(taskPlan),
            parallelism: Math.min(inputs.length, runtime.maxConcurrentTasks ?? inputs.length),
            timeoutMs: (runtime.timeout ?? 0) * 1000,
          },
        };
        // With a launcher (serveSimulator) and a command, the tasks run for real (jobs/runner.ts); else they follow the plan.
        const command = jobCommand(runtime);
        if (deps.jobs.runsTasks && command) {
          const by = { sub: ctx.principal.sub, type: ctx.principal.type, scopes: [...ctx.principal.scopes] };
          doc.__run = {
            dataToken: randomBytes(24).toString("base64url"),
            command,
            maxRetries: Math.max(0, runtime.maxRetries ?? 0),
            by,
            tasks: newRunTasks(inputs.length),
          };
        }
        const execution = { kind: EXECUTION_KIND, parent: job.name, name: id, createdMs: doc.__plan.createdMs, status: "queued", doc };
        insertChild(deps, ctx, execution, () => errors.conflict(`execution "${id}" already exists`));
        if (doc.__run) deps.jobs.start({ workspace: ctx.workspace, job: job.name, execution: id });
        return { executionId: id, id, jobId: job.name, workspaceId: ctx.workspace, tasks: inputs };
      },
    },
    {
      id: "getJobExecution",
      method: "get",
      path: "/jobs/:jobId/executions/:executionId",
      scope: "jobs:get",
      handler: (ctx) => render(deps, ctx, loadExecution(deps, ctx)),
    },
    {
      id: "deleteJobExecution",
      method: "delete",
      path: "/jobs/:jobId/executions/:executionId",
      scope: "jobs:update",
      handler: (ctx) => {
        const item = loadExecution(deps, ctx);
        const state = executionState(item.doc, deps.clock.now());
        // Cancelling a finished execution changes nothing. Simulated: tasks in flight finish, none start.
        // Run for real: the running commands are killed (their tasks end cancelled), none start.
        if (!TERMINAL.includes(state.status) && item.doc.__plan.cancelMs === undefined) {
          item.doc.__plan.cancelMs = deps.clock.now();
          deps.resources.update(item);
          if (item.doc.__run) deps.jobs.cancel({ workspace: ctx.workspace, job: item.doc.job, execution: item.doc.id });
        }
        return render(deps, ctx, item);
      },
    },
    {
      id: "listJobExecutionTasks",
      method: "get",
      path: "/jobs/:jobId/executions/:executionId/tasks",
      scope: "jobs:get",
      handler: (ctx) => {
        const tasks = render(deps, ctx, loadExecution(deps, ctx)).tasks;
        if (!ctx.paginated) return tasks;
        return { data: tasks, meta: { hasMore: false, nextCursor: "", total: tasks.length } };
      },
    },
  ];
}
