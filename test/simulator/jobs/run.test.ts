import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { jobCommand } from "../../../simulator/jobs/run-state.js";
import { ProcessLauncher } from "../../../simulator/launcher/index.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { isAlive, tempBase } from "../launcher/helpers.js";

/**
 * Job executions run for real with the process launcher: each task's command
 * runs in its own agent, and the execution follows what ran (exit codes,
 * retries, timeouts, cancel by pid, concurrency, blStartJob's environment).
 */
type Sdk = typeof import("@blaxel/core");
type Execution = {
  status?: string;
  stats?: Record<string, number>;
  tasks?: {
    status?: string;
    conditions?: { reason?: string; message?: string }[];
    result?: { attempts: number; exitCode?: number; stdout: string; stderr: string; error?: string };
  }[];
};
const KEY = "jobs-run-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;
const scratch = tempBase("jobs-run-");

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: "jobsrun", logLevel: "silent" }, { launcher: new ProcessLauncher() });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${sim.url}/v0${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function createJob(name: string, runtime: Record<string, unknown>): Promise<void> {
  const res = await api("POST", "/jobs", { metadata: { name }, spec: { runtime } });
  expect(res.status).toBe(200);
}

const TERMINAL = ["succeeded", "failed", "cancelled", "timeout"];
async function finished(job: string, id: string, ms = 60_000): Promise<Execution> {
  const deadline = Date.now() + ms;
  for (;;) {
    const execution = (await sdk.blJob(job).getExecution(id)) as Execution;
    if (TERMINAL.includes(execution.status ?? "")) return execution;
    if (Date.now() > deadline) throw new Error(`execution ${id} still ${execution.status}`);
    await sleep(100);
  }
}

async function until(check: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(50);
  }
}

describe("the job's command", () => {
  it("is runtime.command (a shell line or an argv) with runtime.args appended, quoted", () => {
    expect(jobCommand({ command: "echo hi && exit 2" })).toBe("echo hi && exit 2");
    expect(jobCommand({ command: ["node", "job.js"], args: ["--name", "a b", "it's"] })).toBe(`node job.js --name 'a b' 'it'\\''s'`);
    expect(jobCommand({})).toBeUndefined();
    expect(jobCommand({ command: "  " })).toBeUndefined();
  });
});

describe("job executions run for real (process launcher)", () => {
  it("each task runs the command with its index, the job's envs and the execution's overrides; exit codes decide the statuses", async () => {
    await createJob("exits", {
      command: `echo "task $TASK_INDEX of $TASK_COUNT: $GREETING $WHO"; echo oops >&2; test "$TASK_INDEX" = 0`,
      envs: [
        { name: "GREETING", value: "hello" },
        { name: "WHO", value: "job" },
      ],
    });
    const id = await sdk.blJob("exits").run([{}, {}], { env: { WHO: "override" } });
    const execution = await finished("exits", id);
    expect(execution.status).toBe("failed");
    expect(execution.stats).toMatchObject({ total: 2, success: 1, failure: 1, retried: 0 });
    const [ok, failed] = execution.tasks!;
    expect(ok!.status).toBe("succeeded");
    expect(ok!.result).toMatchObject({ attempts: 1, exitCode: 0, stdout: "task 0 of 2: hello override\n", stderr: "oops\n" });
    expect(failed!.status).toBe("failed");
    expect(failed!.result).toMatchObject({ exitCode: 1, error: "exited with code 1" });
    expect(failed!.conditions![0]).toMatchObject({ reason: "Failed", message: "exited with code 1" });
    // job_compute_runtime_gbs follows the real run times: each task's start to end × 2 GB (the default memory).
    const res = await fetch(
      `${sim.url}/v0/accounts/local/metrics?startTime=2020-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z&groupBy=billing_dimension,resource_name`,
      { headers: { authorization: `Bearer ${KEY}` } },
    );
    const rows = ((await res.json()) as { data: { billingDimension: string; resourceName: string; summary: { usage: number } }[] }).data;
    const billed = rows.find((r) => r.billingDimension === "job_compute_runtime_gbs" && r.resourceName === "exits")!.summary.usage;
    const ran = (execution.tasks as unknown as { metadata: { startedAt: string; completedAt: string } }[]).reduce(
      (s, t) => s + (Date.parse(t.metadata.completedAt) - Date.parse(t.metadata.startedAt)) / 1000,
      0,
    );
    expect(billed).toBeGreaterThan(0);
    expect(billed).toBeCloseTo(ran * 2, 2);
    // The task environments are gone once they ran.
    expect(existsSync(join(sim.agents.dir, "jobs", "jobsrun", "exits", id, "task-0-1"))).toBe(false);
  }, 90_000);

  it("blStartJob reads the task's arguments from BL_EXECUTION_DATA_URL by TASK_INDEX, with credentials for the control plane", async () => {
    const sdkEntry = resolve("node_modules/@blaxel/core/dist/esm/index.js");
    const script = join(scratch, "job.mjs");
    writeFileSync(
      script,
      `import { blStartJob, blJob } from ${JSON.stringify(sdkEntry)};
blStartJob(async (args) => {
  const execution = await blJob(process.env.BL_NAME).getExecution(process.env.BL_EXECUTION_ID);
  console.log(JSON.stringify({ args, status: execution.status }));
});
`,
    );
    await createJob("sdk-job", { command: [process.execPath, script] });
    const id = await sdk.blJob("sdk-job").run([{ name: "first" }, { name: "second", n: 2 }]);
    const execution = await finished("sdk-job", id);
    expect(execution.status).toBe("succeeded");
    expect(JSON.parse(execution.tasks![0]!.result!.stdout)).toEqual({ args: { name: "first" }, status: "running" });
    expect(JSON.parse(execution.tasks![1]!.result!.stdout)).toEqual({ args: { name: "second", n: 2 }, status: "running" });
    // The data URL answers only with the execution's secret.
    expect((await fetch(`${sim.url}/job-data/jobsrun/sdk-job/${id}/wrong-token`)).status).toBe(404);
  }, 90_000);

  it("a failed attempt is retried up to maxRetries: a task that succeeds on its second try", async () => {
    const marker = join(scratch, "tried-once");
    await createJob("retries", {
      command: `if [ -f '${marker}' ]; then echo second try; else touch '${marker}'; echo first try >&2; exit 3; fi`,
      maxRetries: 2,
    });
    const id = await sdk.blJob("retries").run([{}]);
    const execution = await finished("retries", id);
    expect(execution.status).toBe("succeeded");
    expect(execution.stats).toMatchObject({ success: 1, failure: 0, retried: 1 });
    expect(execution.tasks![0]!.result).toMatchObject({ attempts: 2, exitCode: 0, stdout: "second try\n" });
  }, 90_000);

  it("a task running past the job's timeout is killed and the execution ends in timeout", async () => {
    const pidFile = join(scratch, "timeout.pid");
    await createJob("slow", { command: `echo $$ > '${pidFile}'; exec sleep 120`, timeout: 1 });
    const id = await sdk.blJob("slow").run([{}]);
    const execution = await finished("slow", id);
    expect(execution.status).toBe("timeout");
    expect(execution.tasks![0]!.status).toBe("failed");
    expect(execution.tasks![0]!.conditions![0]).toMatchObject({ reason: "Timeout" });
    expect(execution.tasks![0]!.result!.error).toMatch(/timed out after 1 s/);
    expect(isAlive(Number(readFileSync(pidFile, "utf8")))).toBe(false);
  }, 90_000);

  it("cancel (DELETE) kills the running task's process and starts no other task", async () => {
    const pidFile = join(scratch, "cancel.pid");
    await createJob("cancelled", { command: `echo $$ > '${pidFile}-'$TASK_INDEX; exec sleep 120`, maxConcurrentTasks: 1 });
    const id = await sdk.blJob("cancelled").run([{}, {}]);
    await until(() => existsSync(`${pidFile}-0`) && readFileSync(`${pidFile}-0`, "utf8").endsWith("\n"));
    const pid = Number(readFileSync(`${pidFile}-0`, "utf8"));
    expect(isAlive(pid)).toBe(true);
    await sdk.blJob("cancelled").cancelExecution(id);
    const execution = await finished("cancelled", id);
    expect(execution.status).toBe("cancelled");
    expect(execution.tasks!.map((t) => t.status)).toEqual(["cancelled", "cancelled"]);
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(`${pidFile}-1`)).toBe(false);
  }, 90_000);

  it("deleting the job kills its running tasks", async () => {
    const pidFile = join(scratch, "deleted-job.pid");
    await createJob("deleted", { command: `echo $$ > '${pidFile}'; exec sleep 120` });
    await sdk.blJob("deleted").run([{}]);
    await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"));
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect((await api("DELETE", "/jobs/deleted")).status).toBe(200);
    await until(() => !isAlive(pid));
  }, 90_000);

  it("runs maxConcurrentTasks tasks at a time", async () => {
    const log = join(scratch, "concurrency.log");
    await createJob("one-at-a-time", { command: `echo start $TASK_INDEX >> '${log}'; sleep 0.2; echo end $TASK_INDEX >> '${log}'`, maxConcurrentTasks: 1 });
    const id = await sdk.blJob("one-at-a-time").run([{}, {}, {}]);
    expect((await finished("one-at-a-time", id)).status).toBe("succeeded");
    expect(readFileSync(log, "utf8").trim().split("\n")).toEqual(["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]);
  }, 90_000);

  it("a simulator stop kills the running tasks; after a --data restart their execution reads failed, saying why", async () => {
    const data = join(scratch, "restart.db");
    const config = { port: 0, apiKey: "jobs-restart-key", workspace: "jobsrestart", logLevel: "silent" as const, data };
    let served = await serveSimulator(config, { launcher: new ProcessLauncher() });
    const pidFile = join(scratch, "restart.pid");
    try {
      const call = (method: string, path: string, body?: unknown) =>
        fetch(`${served.url}/v0${path}`, {
          method,
          headers: { authorization: "Bearer jobs-restart-key", "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        }).then((r) => r.json() as Promise<Record<string, unknown>>);
      await call("POST", "/jobs", { metadata: { name: "long" }, spec: { runtime: { command: `echo $$ > '${pidFile}'; exec sleep 120` } } });
      const { executionId } = await call("POST", "/jobs/long/executions", {});
      await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"));
      const pid = Number(readFileSync(pidFile, "utf8"));
      await served.stop();
      expect(isAlive(pid)).toBe(false);
      served = await serveSimulator(config, { launcher: new ProcessLauncher() });
      const execution = (await call("GET", `/jobs/long/executions/${executionId as string}`)) as Execution;
      expect(execution.status).toBe("failed");
      expect(execution.tasks![0]!.result!.error).toBe("the simulator stopped while the task ran");
    } finally {
      await served.stop();
    }
  }, 90_000);

  it("a job without a command keeps the simulated plan", async () => {
    await createJob("records-only", {});
    const res = await api("POST", "/jobs/records-only/executions", { tasks: [{ durationMs: 0 }] });
    expect(res.status).toBe(200);
    const execution = await finished("records-only", res.body.executionId as string);
    expect(execution.status).toBe("succeeded");
    expect(execution.tasks![0]!.result).toBeUndefined();
  }, 30_000);
});
