import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { eventually } from "../../sandbox-agent/schedules/eventually.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * The SDK's own integration test "fires a one-off at schedule (auto-deletes after firing)"
 * (blaxel-ai/sdk-typescript tests/integration/sandbox/schedules.test.ts), through @blaxel/core against the
 * simulator with a real agent: listed after create, gone from list() once fired, its execution still listed. (npm run build first: the agent runs from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
let sim: ServedSimulator;
let sdk: Sdk;

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: "sdk-one-off-admin-key", workspace: "sdk-one-off", logLevel: "silent" });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

describe("a one-off `at` schedule through @blaxel/core", () => {
  it("fires, then is deleted from the sandbox's schedules; its execution stays readable", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "one-off" });
    const mark = `SCHEDMARK-AT-${Date.now()}-fire`;
    const at = await sandbox.schedules.create({
      type: "at",
      value: new Date(Date.now() + 2_000).toISOString(),
      input: { command: `echo ${mark}`, keepAlive: true, timeout: 60 },
    });
    expect(at.id).toBeDefined();
    // @blaxel/core 0.3.21 answers a page ({data, meta}); the SDK's newer test reads an array.
    const listed = async () => (await sandbox.schedules.list()).data;
    expect((await listed()).find((s) => s.id === at.id)).toBeDefined();
    const cron = await sandbox.schedules.create({ type: "cron", value: "0 8 * * 1-5", input: { command: "true" } });

    await eventually(async () => !(await listed()).find((s) => s.id === at.id), 30_000, "the one-off gone from list()");
    await expect(sandbox.schedules.get(at.id!)).rejects.toMatchObject({ code: 404 });
    expect((await listed()).map((s) => s.id)).toEqual([cron.id]); // only the one-off goes

    const executions = (await sandbox.schedules.executions()).data;
    expect(Array.isArray(executions)).toBe(true);
    const run = executions.find((e) => e.scheduleId === at.id);
    expect(run).toMatchObject({ scheduleId: at.id, status: "succeeded", statusCode: 200 });
    const logs = await sandbox.process.logs(run!.processName!);
    expect(logs).toContain(mark);
    await sdk.SandboxInstance.delete("one-off");
  }, 90_000);
});
