import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/agents/serve.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * Job tasks under the default (isolating) launcher cannot reach the simulator
 * (the host's loopback is closed to them, as to sandboxes): BL_EXECUTION_DATA_URL
 * is then a data: URL, and a task fetching it as blStartJob does (Node's fetch)
 * gets its own input by TASK_INDEX.
 */
type Sdk = typeof import("@blaxel/core");
type Execution = { status?: string; tasks?: { status?: string; result?: { stdout: string; stderr: string; exitCode?: number } }[] };
const KEY = "jobs-isolated-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;

beforeAll(async () => {
  if (isolationUnavailable) return;
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: "jobsiso", logLevel: "silent" });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

// What blStartJob does (dist/esm/jobs/start.js): fetch the URL, take tasks[TASK_INDEX].
const BL_START_JOB_FETCH = `node -e 'fetch(process.env.BL_EXECUTION_DATA_URL).then((r) => r.json()).then((d) => console.log(JSON.stringify(d.tasks[Number(process.env.TASK_INDEX)])))'`;

describe.skipIf(isolationUnavailable !== undefined)("job tasks in isolated environments", () => {
  it("read their input through BL_EXECUTION_DATA_URL although the simulator is out of their reach", async () => {
    const created = await fetch(`${sim.url}/v0/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ metadata: { name: "inputs" }, spec: { runtime: { command: `${BL_START_JOB_FETCH}; curl -s -m 2 ${sim.url}/health >/dev/null && echo reached || echo unreachable` } } }),
    });
    expect(created.status).toBe(200);
    const id = await sdk.blJob("inputs").run([{ name: "first" }, { name: "second", n: 2 }]);
    let execution: Execution = {};
    for (let i = 0; i < 600 && !["succeeded", "failed", "cancelled"].includes(execution.status ?? ""); i++) {
      await sleep(100);
      execution = (await sdk.blJob("inputs").getExecution(id)) as Execution;
    }
    if (execution.status !== "succeeded") console.log(JSON.stringify(execution.tasks));
    expect(execution.status).toBe("succeeded");
    expect(execution.tasks!.map((t) => t.result!.stdout)).toEqual([`{"name":"first"}\nunreachable\n`, `{"name":"second","n":2}\nunreachable\n`]);
  }, 90_000);
});
