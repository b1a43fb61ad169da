import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { eventually } from "./eventually.js";

let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent({ sandboxName: "my-sandbox" });
});
afterAll(() => agent.stop());

const api = () => request(agent.url);
const create = (body: object) => api().post("/schedules").send(body);
const cron = (id: string, extra: object = {}) => ({ id, type: "cron", value: "0 3 * * *", input: { command: "echo hi" }, ...extra });

async function finished(scheduleId: string, executionId: string) {
  return eventually(
    async () => {
      const { body } = await api().get(`/schedules/${scheduleId}/executions`).expect(200);
      const e = body.data.find((x: { id: string }) => x.id === executionId);
      return e && e.status !== "running" ? e : undefined;
    },
    5_000,
    `execution ${executionId} finished`,
  );
}

describe("POST /schedules", () => {
  it("creates a cron schedule: the SDK's SandboxScheduleEntry plus timezone, policy and next run", async () => {
    const { body } = await create({ ...cron("nightly"), input: { command: "echo hi", env: { API_KEY: "s3cret" } } }).expect(200);
    expect(body).toMatchObject({
      id: "nightly",
      sandbox: "my-sandbox",
      type: "cron",
      value: "0 3 * * *",
      timezone: "UTC",
      concurrencyPolicy: "Forbid",
      maxExecutions: 100,
      input: { command: "echo hi", env: { API_KEY: "***" }, keepAlive: true, timeout: 600, name: "", workingDir: "" },
      status: "active",
      lastRunAt: null,
    });
    expect(body.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(body.nextRunAt).toMatch(/T03:00:00\.000Z$/);
  });

  it("generates an id when absent; a duplicate id is a 409", async () => {
    const { body } = await create({ type: "cron", value: "0 3 * * *", input: { command: "true" } }).expect(200);
    expect(body.id).toMatch(/^[0-9a-f-]{36}$/);
    const dup = await create(cron("dup"))
      .expect(200)
      .then(() => create(cron("dup")).expect(409));
    expect(dup.body.error).toMatch(/"dup" already exists/);
  });

  it("resolves sleep to an RFC 3339 UTC `at`, and natural language in the schedule's zone", async () => {
    const before = Date.now();
    const sleep = (await create({ id: "nap", type: "sleep", value: "1h30m", input: { command: "true" } }).expect(200)).body;
    expect(sleep.type).toBe("at");
    expect(Date.parse(sleep.value) - before).toBeGreaterThanOrEqual(90 * 60_000);
    expect(sleep.value).toMatch(/Z$/);
    const nl = (await create({ id: "nl", type: "at", value: "tomorrow at 9am", timezone: "Asia/Tokyo", input: { command: "true" } }).expect(200)).body;
    expect(nl.value).toMatch(/T00:00:00\.000Z$/); // 09:00 JST
    expect(nl.timezone).toBe("Asia/Tokyo");
  });

  it.each([
    [{ type: "cron", value: "0 0 3 * * *" }, /body\.value: .*exactly 5 fields.*got 6/],
    [{ type: "cron", value: "every day" }, /body\.value: .*exactly 5 fields/],
    [{ type: "cron", value: "99 * * * *" }, /body\.value: .*invalid minute field "99"/],
    [{ type: "at", value: "2001-01-01T00:00:00Z" }, /body\.value: .*in the past/],
    [{ type: "at", value: "someday maybe" }, /body\.value: .*neither an RFC 3339/],
    [{ type: "sleep", value: "-5m" }, /body\.value: invalid duration/],
    [{ type: "sleep", value: "10" }, /body\.value: invalid duration/],
    [{ type: "sleep", value: "0m" }, /body\.value: invalid duration.*greater than zero/],
    [{ type: "weekly", value: "x" }, /body\.type: must be "cron", "at" or "sleep"/],
    [{ type: "cron" }, /body\.value: is required/],
    [{ type: "cron", value: "0 3 * * *", timezone: "Mars/Olympus" }, /body\.timezone: "Mars\/Olympus" is not an IANA time zone/],
    [{ type: "cron", value: "0 3 * * *", maxExecutions: 0 }, /body\.maxExecutions: must be between 1 and 10000/],
    [{ type: "cron", value: "0 3 * * *", maxExecutions: 10_001 }, /body\.maxExecutions: must be between 1 and 10000/],
    [{ type: "cron", value: "0 3 * * *", concurrencyPolicy: "Sometimes" }, /body\.concurrencyPolicy/],
    [{ id: "no/slash", type: "cron", value: "0 3 * * *" }, /body\.id: must be 1-63/],
  ])("rejects %j with a 400 naming the problem", async (bad, message) => {
    const { body } = await create({ input: { command: "true" }, ...bad }).expect(400);
    expect(body.error).toMatch(message);
  });

  it("rejects a missing command or input with a 400", async () => {
    expect((await create({ type: "cron", value: "0 3 * * *", input: {} }).expect(400)).body.error).toMatch(/body\.input\.command: is required/);
    expect((await create({ type: "cron", value: "0 3 * * *", input: { command: "  " } }).expect(400)).body.error).toMatch(
      /body\.input\.command: must not be empty/,
    );
    expect((await create({ type: "cron", value: "0 3 * * *" }).expect(400)).body.error).toMatch(/body\.input: is required/);
    expect((await api().post("/schedules").set("Content-Type", "application/json").send("{oops").expect(400)).body.error).toMatch(/invalid JSON/);
  });
});

describe("GET, PUT, DELETE /schedules/{id}", () => {
  it("gets one, 404 for an unknown id", async () => {
    await create(cron("g1")).expect(200);
    expect((await api().get("/schedules/g1").expect(200)).body.id).toBe("g1");
    expect((await api().get("/schedules/nope").expect(404)).body.error).toMatch(/schedule "nope" not found/);
  });

  it("PUT replaces the definition, keeps createdAt; an id mismatch is a 400, unknown a 404", async () => {
    const created = (await create(cron("p1")).expect(200)).body;
    const { body } = await api()
      .put("/schedules/p1")
      .send({ type: "cron", value: "*/10 * * * *", timezone: "Europe/Paris", input: { command: "date" }, maxExecutions: 5 })
      .expect(200);
    expect(body).toMatchObject({
      id: "p1",
      value: "*/10 * * * *",
      timezone: "Europe/Paris",
      maxExecutions: 5,
      input: { command: "date" },
      createdAt: created.createdAt,
    });
    expect(
      (
        await api()
          .put("/schedules/p1")
          .send({ ...cron("other") })
          .expect(400)
      ).body.error,
    ).toMatch(/body\.id: "other" does not match/);
    await api().put("/schedules/ghost").send(cron("ghost")).expect(404);
    await api()
      .put("/schedules/p1")
      .send({ type: "cron", value: "* * * * * *", input: { command: "x" } })
      .expect(400);
  });

  it("DELETE returns the deleted schedule; then it is gone", async () => {
    await create(cron("d1")).expect(200);
    expect((await api().delete("/schedules/d1").expect(200)).body).toMatchObject({ id: "d1", type: "cron" });
    await api().get("/schedules/d1").expect(404);
    await api().delete("/schedules/d1").expect(404);
  });
});

describe("POST /schedules/{id}/run with real processes", () => {
  it("runs now and records the outcome and the tail of the output", async () => {
    await create({ ...cron("hello"), input: { command: "echo hi", name: "greeter" } }).expect(200);
    const { body: run } = await api().post("/schedules/hello/run").expect(200);
    expect(run).toMatchObject({ scheduleId: "hello", sandbox: "my-sandbox", status: "running", statusCode: 200, trigger: "manual", timeout: 600, error: "" });
    expect(run.processName).toMatch(/^greeter-/);
    expect(await finished("hello", run.id)).toMatchObject({ status: "succeeded", exitCode: 0, output: "hi\n", error: "" });
    // the process is visible through the process API under the execution's name
    expect((await api().get(`/process/${run.processName}`).expect(200)).body).toMatchObject({ status: "completed", exitCode: 0 });
  });

  it("a non-zero exit is a failed execution with the exit code", async () => {
    await create({ ...cron("three"), input: { command: "exit 3" } }).expect(200);
    const { body: run } = await api().post("/schedules/three/run").expect(200);
    expect(await finished("three", run.id)).toMatchObject({ status: "failed", exitCode: 3, error: expect.stringMatching(/3/) });
  });

  it("a timeout kills the run: failed, with the reason", async () => {
    await create({ ...cron("slow"), input: { command: "sleep 5", timeout: 1 } }).expect(200);
    const { body: run } = await api().post("/schedules/slow/run").expect(200);
    const done = await finished("slow", run.id);
    expect(done.status).toBe("failed");
    expect(done.error).toMatch(/time/i);
  });

  it("under Forbid answers 409 while a run is in progress, and runs again once it ended", async () => {
    await create({ ...cron("busy"), input: { command: "sleep 0.3" } }).expect(200);
    const { body: first } = await api().post("/schedules/busy/run").expect(200);
    expect((await api().post("/schedules/busy/run").expect(409)).body.error).toMatch(/run in progress.*Forbid/);
    await finished("busy", first.id);
    await api().post("/schedules/busy/run").expect(200);
  });

  it("under Allow runs concurrently", async () => {
    await create({ ...cron("many", { concurrencyPolicy: "Allow" }), input: { command: "sleep 0.3" } }).expect(200);
    const a = (await api().post("/schedules/many/run").expect(200)).body;
    const b = (await api().post("/schedules/many/run").expect(200)).body;
    expect(a.processName).not.toBe(b.processName);
    await finished("many", a.id);
    await finished("many", b.id);
  });

  it("retention holds under concurrent runs: never more than maxExecutions records", async () => {
    await create({ ...cron("burst", { concurrencyPolicy: "Allow", maxExecutions: 3 }), input: { command: "true" } }).expect(200);
    const runs = await Promise.all(Array.from({ length: 12 }, () => api().post("/schedules/burst/run").expect(200)));
    const { body } = await api().get("/schedules/burst/executions").expect(200);
    expect(body.meta.total).toBe(3);
    expect(body.data.map((e: { id: string }) => e.id).sort()).toEqual(
      runs
        .map((r) => r.body.id)
        .sort()
        .slice(-3),
    );
  });

  it("a bad workingDir fails the execution with the runner's status code", async () => {
    await create({ ...cron("nowhere"), input: { command: "true", workingDir: "/does/not/exist" } }).expect(200);
    const { body } = await api().post("/schedules/nowhere/run").expect(200);
    expect(body.status).toBe("failed");
    expect(body.statusCode).toBeGreaterThanOrEqual(400);
    expect(body.error).toMatch(/could not start the process/);
  });

  it("404 for an unknown schedule", async () => {
    await api().post("/schedules/ghost/run").expect(404);
  });
});

describe("scheduled firing", () => {
  it("fires a `sleep` schedule on time, then deletes it as the platform does; its executions stay readable", async () => {
    await create({ id: "soon", type: "sleep", value: "1s", input: { command: "echo fired" } }).expect(200);
    const done = await eventually(
      async () => {
        const { body } = await api().get("/schedules/soon/executions").expect(200);
        return body.data[0]?.status === "succeeded" ? body.data[0] : undefined;
      },
      5_000,
      "scheduled run",
    );
    expect(done).toMatchObject({ trigger: "schedule", output: "fired\n" });
    expect((await api().get("/schedules/soon").expect(404)).body).toEqual({ error: 'schedule "soon" not found' });
    await api().delete("/schedules/soon").expect(404);
    await api().post("/schedules/soon/run").expect(404);
    expect((await api().get("/schedules?type=at&limit=100").expect(200)).body.data.map((s: { id: string }) => s.id)).not.toContain("soon");
    expect((await api().get("/schedule-executions?scheduleId=soon").expect(200)).body.data).toMatchObject([{ scheduleId: "soon", status: "succeeded" }]);
  });
});
