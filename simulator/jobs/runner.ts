import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { removeTree, type AgentHandle, type Launcher, type LaunchSpec } from "../launcher/types.js";
import { describeLauncher } from "../launcher/index.js";
import type { ResourceDoc } from "../resources/kind.js";
import type { ResourceStore, StoredResource } from "../store/resources.js";
import type { RunDoc, RunRecord, RunTask } from "./run-state.js";
import { killTaskCommand, runTaskCommand, type AttemptResult } from "./task-command.js";
import { taskEnv } from "./task-env.js";
import { settleExecution, type MeteredExecution } from "./job-usage.js";
import type { ExecutionRef, JobExecutor } from "./executor.js";
import type { Clock } from "../../src/clock.js";
import type { Logger } from "../../src/logging.js";
import type { UsageStore } from "../metrics/usage-store.js";

/**
 * Runs job executions for real: each attempt of a task gets its own
 * environment from the simulator's launcher, like a sandbox's (a fresh root
 * and agent state dir under <dir>/jobs/, the job's image, its envs, the
 * execution's overrides and what blStartJob reads), runs the job's command
 * through that agent's /process API (waitForCompletion, the job's timeout
 * as the process timeout: the agent kills the process group), records exit
 * code, output and times on the execution, then stops the agent and removes
 * its files. `concurrency` tasks run at a time; a failed attempt is retried
 * up to the job's maxRetries; a cancel kills the running commands and starts
 * no new ones.
 */

const EXECUTION_KIND = "job-execution";

export interface JobRunnerOptions {
  launcher: Launcher;
  /** Where tasks' files live while they run (<dir>/jobs/...). */
  dir: string;
  deps: { resources: ResourceStore; clock: Clock; urls: { base: string }; logger: Logger; jwtSecret: Buffer; usage: UsageStore };
  logLevel?: string;
  /** The simulator's egress for a task (simulator/egress), used where the launcher has `egress`: the API and previews by their URLs. */
  egress?: (workspace: string, task: string) => { spec: NonNullable<LaunchSpec["egress"]>; env: Record<string, string> };
}

interface Attempt {
  handle?: AgentHandle;
  token: string;
}

type ExecutionItem = StoredResource<MeteredExecution & { env: Record<string, string>; taskInputs: unknown[] }>;

/** Task data up to this size (JSON bytes) goes inline in a data: URL; Linux caps one environment string at 128 KiB. */
const INLINE_DATA_MAX = 64 * 1024;

const keyOf = (r: ExecutionRef) => `${r.workspace}/${r.job}/${r.execution}`;

export class JobRunner implements JobExecutor {
  readonly runsTasks = true;
  private readonly attempts = new Map<string, Set<Attempt>>();
  private readonly cancelled = new Set<string>();
  /** Set by stopAll: tasks it ends are failed ("the simulator stopped"), not cancelled (nobody cancelled them). */
  private stopping = false;
  private readonly runs = new Set<Promise<void>>();
  /** Whether task environments are isolated from the host's network (the launcher's isolation). */
  private isolated?: boolean;

  constructor(private readonly options: JobRunnerOptions) {}

  /** The URL blStartJob fetches for the execution's task data (BL_EXECUTION_DATA_URL). */
  dataUrl(ref: ExecutionRef, token: string): string {
    return `${this.options.deps.urls.base}/job-data/${[ref.workspace, ref.job, ref.execution, token].map(encodeURIComponent).join("/")}`;
  }

  /**
   * BL_EXECUTION_DATA_URL for a task. An isolated task environment cannot
   * reach the simulator (the host's loopback is closed to it, as to every
   * sandbox), so there the data travels in the URL itself: a `data:` URL, which
   * Node's fetch (blStartJob's) reads like any response. Larger than an
   * environment variable comfortably holds, it is the simulator's HTTP URL.
   */
  private executionDataUrl(ref: ExecutionRef, taskInputs: unknown[], token: string): string {
    this.isolated ??= describeLauncher(this.options.launcher).isolated;
    const json = JSON.stringify({ tasks: taskInputs });
    if (this.isolated && json.length <= INLINE_DATA_MAX) return `data:application/json;base64,${Buffer.from(json).toString("base64")}`;
    return this.dataUrl(ref, token);
  }

  /** Starts running a stored execution (its doc carries __run); returns at once. */
  start(ref: ExecutionRef): void {
    const run: Promise<void> = this.execute(ref)
      .catch((err: Error) => this.options.deps.logger.error({ ...ref, err: err.message }, "job execution runner failed"))
      .finally(() => {
        this.runs.delete(run);
        this.cancelled.delete(keyOf(ref));
      });
    this.runs.add(run);
  }

  /** Cancel: no task starts any more, the running commands are killed (their tasks end cancelled). */
  cancel(ref: ExecutionRef): void {
    this.cancelled.add(keyOf(ref));
    for (const attempt of this.attempts.get(keyOf(ref)) ?? []) void this.killCommand(attempt);
  }

  /** Job (or workspace, without `job`) deletion: its running executions are cancelled (their records go with it). */
  cancelJob(workspace: string, job?: string): void {
    for (const key of new Set([...this.attempts.keys()])) {
      const [ws, name, execution] = key.split("/") as [string, string, string];
      if (ws === workspace && (job === undefined || name === job)) this.cancel({ workspace, job: name, execution });
    }
  }

  /** Simulator stop: every running execution's commands are killed and its environments stopped; its tasks end failed. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    for (const key of this.attempts.keys()) {
      const [workspace, job, execution] = key.split("/") as [string, string, string];
      this.cancel({ workspace, job, execution });
    }
    await Promise.allSettled([...this.runs]);
  }

  /**
   * A --data restart: executions the previous run was running cannot go on
   * (their environments are gone): their unfinished tasks end failed, saying why.
   */
  failInterrupted(workspaces: string[]): void {
    const now = this.options.deps.clock.now();
    for (const workspace of workspaces) {
      for (const item of this.options.deps.resources.allOfKind<RunDoc>(workspace, [EXECUTION_KIND])) {
        const run = item.doc.__run;
        if (!run || run.tasks.every((t) => ["succeeded", "failed", "cancelled"].includes(t.status))) continue;
        for (const t of run.tasks) {
          if (t.status === "running") Object.assign(t, { status: "failed", endMs: now, error: "the simulator stopped while the task ran" });
          if (t.status === "pending")
            Object.assign(t, { status: item.doc.__plan.cancelMs === undefined ? "failed" : "cancelled", error: "the simulator stopped before the task ran" });
        }
        run.startedMs ??= now;
        this.options.deps.resources.update(item);
      }
    }
  }

  private load(ref: ExecutionRef): ExecutionItem | undefined {
    return this.options.deps.resources.get(ref.workspace, EXECUTION_KIND, ref.execution, ref.job) as ExecutionItem | undefined;
  }

  /** Applies a change to the stored run record (read fresh, saved at once: render and cancel write the same row). */
  private change(ref: ExecutionRef, apply: (run: RunRecord) => void): void {
    const item = this.load(ref);
    if (!item?.doc.__run) return;
    apply(item.doc.__run);
    this.options.deps.resources.update(item);
  }

  private changeTask(ref: ExecutionRef, index: number, apply: (task: RunTask) => void): void {
    this.change(ref, (run) => apply(run.tasks[index]!));
  }

  private async execute(ref: ExecutionRef): Promise<void> {
    const item = this.load(ref);
    const job = this.options.deps.resources.get<ResourceDoc>(ref.workspace, "job", ref.job);
    if (!item?.doc.__run || !job) return;
    const now = () => this.options.deps.clock.now();
    this.change(ref, (run) => (run.startedMs = now()));
    const queue = item.doc.__run.tasks.map((t) => t.index);
    const workers = Array.from({ length: Math.max(1, item.doc.__plan.parallelism) }, async () => {
      while (queue.length > 0 && !this.cancelled.has(keyOf(ref))) await this.runTask(ref, job.doc, queue.shift()!);
    });
    await Promise.all(workers);
    // Tasks a cancel kept from starting.
    this.change(ref, (run) => {
      for (const t of run.tasks) if (t.status === "pending") Object.assign(t, this.interrupted("before the task ran"));
    });
    const ended = this.load(ref);
    if (ended) settleExecution(this.options.deps, ended, now()); // records the real run time (job_compute_runtime_gbs)
  }

  private async runTask(ref: ExecutionRef, job: ResourceDoc, index: number): Promise<void> {
    const now = () => this.options.deps.clock.now();
    const maxRetries = this.load(ref)?.doc.__run?.maxRetries ?? 0;
    for (let attempt = 1; attempt <= maxRetries + 1; attempt++) {
      if (this.cancelled.has(keyOf(ref))) break;
      this.changeTask(ref, index, (t) => Object.assign(t, { status: "running", attempts: attempt, startMs: t.startMs ?? now() }));
      const result = await this.runAttempt(ref, job, index, attempt);
      const outcome = { exitCode: result.exitCode, timedOut: result.timedOut, error: result.error, stdout: result.stdout, stderr: result.stderr };
      if (this.cancelled.has(keyOf(ref))) break;
      if (result.ok) return this.changeTask(ref, index, (t) => Object.assign(t, outcome, { status: "succeeded", endMs: now() }));
      if (attempt === maxRetries + 1) return this.changeTask(ref, index, (t) => Object.assign(t, outcome, { status: "failed", endMs: now() }));
      this.changeTask(ref, index, (t) => Object.assign(t, outcome));
    }
    this.changeTask(ref, index, (t) => Object.assign(t, { endMs: t.startMs === undefined ? undefined : now() }, this.interrupted("while the task ran")));
  }

  /** How a task a cancel or the simulator's stop ended reads. */
  private interrupted(when: string): Partial<RunTask> {
    return this.stopping ? { status: "failed", error: `the simulator stopped ${when}` } : { status: "cancelled", error: "cancelled" };
  }

  private async runAttempt(ref: ExecutionRef, job: ResourceDoc, index: number, attempt: number): Promise<AttemptResult> {
    const item = this.load(ref);
    const run = item?.doc.__run;
    if (!item || !run) return { ok: false, error: "the execution is gone" };
    const base = join(this.options.dir, "jobs", ref.workspace, ref.job, ref.execution, `task-${index}-${attempt}`);
    removeTree(base, this.options.launcher);
    mkdirSync(base, { recursive: true });
    const runtime = (job.spec.runtime ?? {}) as { image?: string; memory?: number; timeout?: number; envs?: { name?: string; value?: string }[] };
    const current: Attempt = { token: randomBytes(24).toString("base64url") };
    const spec: LaunchSpec = {
      workspace: ref.workspace,
      sandbox: `job-${ref.job}-${index}`.slice(0, 63),
      rootDir: join(base, "root"),
      dataDir: join(base, "agent"),
      token: current.token,
      env: taskEnv(this.options.deps, ref, item.doc, runtime.envs ?? [], index, attempt, this.executionDataUrl(ref, item.doc.taskInputs, run.dataToken)),
      image: runtime.image,
      logLevel: this.options.logLevel,
      memoryMb: (item.doc as { memory?: number }).memory ?? runtime.memory,
    };
    const egress = this.options.launcher.egress ? this.options.egress?.(spec.workspace, spec.sandbox) : undefined;
    if (egress) Object.assign(spec, { egress: egress.spec, env: { ...egress.env, ...spec.env } });
    const key = keyOf(ref);
    if (!this.attempts.has(key)) this.attempts.set(key, new Set());
    this.attempts.get(key)!.add(current);
    try {
      current.handle = await this.options.launcher.start(spec);
      if (this.cancelled.has(key)) return { ok: false, error: "cancelled" };
      const timeout = runtime.timeout && runtime.timeout > 0 ? runtime.timeout : undefined;
      return await runTaskCommand(current.handle, current.token, run.command, timeout);
    } catch (err) {
      return { ok: false, error: `the task's environment did not start: ${(err as Error).message}` };
    } finally {
      this.attempts.get(key)?.delete(current);
      if (this.attempts.get(key)?.size === 0) this.attempts.delete(key);
      await current.handle?.stop(5_000);
      removeTree(base, this.options.launcher);
    }
  }

  /**
   * Kills a running command by its name (the agent kills its process group);
   * the waiting POST then answers. Repeated while the attempt lasts: a cancel
   * can come between the agent's start and the command's.
   */
  private async killCommand(attempt: Attempt): Promise<void> {
    for (let tries = 0; tries < 100 && [...this.attempts.values()].some((set) => set.has(attempt)); tries++) {
      if (attempt.handle) await killTaskCommand(attempt.handle, attempt.token).catch(() => {});
      await sleep(200);
    }
  }
}
