import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * Job tasks under the default (isolating) launcher: the host's loopback is
 * closed to them, as to sandboxes, but the simulator's own surface answers by
 * its URLs through the egress gateway (simulator/egress), so a task calls the
 * control-plane API with a key passed in its envs. BL_EXECUTION_DATA_URL is a
 * data: URL, and a task fetching it as blStartJob does (Node's fetch) gets its
 * own input by TASK_INDEX.
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
  it("read their input through BL_EXECUTION_DATA_URL and call the API with a key they were given", async () => {
    const created = await fetch(`${sim.url}/v0/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({
        metadata: { name: "inputs" },
        spec: {
          runtime: {
            envs: [{ name: "API_KEY", value: KEY }],
            command: `${BL_START_JOB_FETCH}; curl -s -m 5 -o /dev/null -w '%{http_code}\\n' -H "Authorization: Bearer $API_KEY" ${sim.env.BL_API_URL}/jobs; curl -s -m 5 -o /dev/null -w '%{http_code}\\n' ${sim.env.BL_API_URL}/jobs`,
          },
        },
      }),
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
    expect(execution.tasks!.map((t) => t.result!.stdout)).toEqual([`{"name":"first"}\n200\n401\n`, `{"name":"second","n":2}\n200\n401\n`]);
  }, 90_000);
});
