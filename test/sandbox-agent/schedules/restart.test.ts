import { join } from "node:path";
import { rmSync } from "node:fs";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { spawnAgent } from "../../helpers/agent-process.js";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { eventually } from "./eventually.js";

const agents: TestAgent[] = [];
afterEach(async () => {
  for (const a of agents.splice(0)) await a.stop();
});

const sleepMs = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("schedules across an agent restart", () => {
  it('re-arms schedules, fires a missed `at` once, fails runs left running with "agent restarted"', async () => {
    const first = await startTestAgent();
    const api1 = request(first.url);
    await api1
      .post("/schedules")
      .send({ id: "cron", type: "cron", value: "0 0 1 1 *", input: { command: "true" } })
      .expect(200);
    await api1
      .post("/schedules")
      .send({ id: "long", type: "cron", value: "0 0 1 1 *", input: { command: "sleep 30" } })
      .expect(200);
    const running = (await api1.post("/schedules/long/run").expect(200)).body;
    await api1
      .post("/schedules")
      .send({ id: "missed", type: "sleep", value: "1s", input: { command: "echo caught up" } })
      .expect(200);
    await first.stop({ keepFiles: true });
    await sleepMs(1_200); // the `at` falls due while no agent runs

    const second = await startTestAgent({ root: first.config.root, dataDir: first.dataDir });
    agents.push(second);
    const api2 = request(second.url);
    const caught = await eventually(
      async () => {
        const { body } = await api2.get("/schedules/missed/executions").expect(200);
        return body.data[0]?.status === "succeeded" ? body.data : undefined;
      },
      5_000,
      "catch-up run",
    );
    expect(caught).toHaveLength(1);
    expect(caught[0]).toMatchObject({ trigger: "catch-up", output: "caught up\n" });
    expect((await api2.get("/schedules/long/executions").expect(200)).body.data).toMatchObject([
      { id: running.id, status: "failed", error: "agent restarted" },
    ]);
    expect((await api2.get("/schedules/cron").expect(200)).body).toMatchObject({
      status: "active",
      nextRunAt: expect.stringMatching(/-01-01T00:00:00\.000Z$/),
    });
    expect(second.runtime.deps.schedules.scheduler.armedCount).toBe(2);
    // the orphaned `sleep 30` was adopted by the process manager: end it
    await api2.delete(`/process/${running.processName}/kill`);

    // a third start does not fire the `at` again
    await second.stop({ keepFiles: true });
    const third = await startTestAgent({ root: first.config.root, dataDir: first.dataDir });
    agents.push(third);
    expect((await request(third.url).get("/schedules/missed/executions").expect(200)).body.data).toHaveLength(1);
    agents.splice(agents.indexOf(second), 1);
  });

  it("after kill -9, the missed `at` fires exactly once on start-up", async () => {
    const base = tempDir();
    const args = ["--root", join(base, "root"), "--data-dir", join(base, "data")];
    try {
      const first = await spawnAgent(args);
      await request(first.url)
        .post("/schedules")
        .send({ id: "missed", type: "sleep", value: "1s", input: { command: "echo once" } })
        .expect(200);
      first.child.kill("SIGKILL");
      await first.exited;
      await sleepMs(1_200);
      const second = await spawnAgent(args);
      try {
        const data = await eventually(
          async () => {
            const { body } = await request(second.url).get("/schedule-executions?scheduleId=missed").expect(200);
            return body.data[0]?.status === "succeeded" ? body.data : undefined;
          },
          5_000,
          "catch-up after kill -9",
        );
        expect(data).toMatchObject([{ trigger: "catch-up", output: "once\n" }]);
        await request(second.url).get("/schedules/missed").expect(404); // fired: deleted, as the platform does
      } finally {
        second.child.kill("SIGTERM");
        await second.exited;
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
