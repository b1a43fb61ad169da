import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { isAlive } from "../../../sandbox-agent/process/os.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

const agents: TestAgent[] = [];
afterEach(async () => {
  for (const a of agents.splice(0)) await a.stop();
});

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Stops `first` leaving its files, and starts a new agent on the same root and data dir. */
async function restart(first: TestAgent): Promise<TestAgent> {
  await first.stop({ keepFiles: true });
  const second = await startTestAgent({ root: first.config.root, dataDir: first.dataDir });
  agents.push(second);
  return second;
}

describe("process records across an agent restart", () => {
  it("finished processes and their output are still there", async () => {
    const first = await startTestAgent();
    const done = (await request(first.url).post("/process").send({ command: "echo kept", name: "kept", waitForCompletion: true }).expect(200)).body;
    const second = await restart(first);
    expect((await request(second.url).get("/process/kept").expect(200)).body).toMatchObject({
      pid: done.pid,
      status: "completed",
      exitCode: 0,
      stdout: "kept\n",
    });
  });

  it("a process that was running and is gone when the agent starts is failed with 'agent restarted'", async () => {
    const first = await startTestAgent();
    const p = (await request(first.url).post("/process").send({ command: "sleep 0.2", name: "vanished" }).expect(200)).body;
    await first.stop({ keepFiles: true });
    await until(() => !isAlive(Number(p.pid)), "the process to end while no agent runs");
    const second = await startTestAgent({ root: first.config.root, dataDir: first.dataDir });
    agents.push(second);
    expect((await request(second.url).get("/process/vanished").expect(200)).body).toMatchObject({
      status: "failed",
      error: "agent restarted",
      exitCode: -1,
    });
    expect(second.runtime.deps.processes.get("vanished")!.completedAt).not.toBeNull();
  });

  it("a process still running is adopted: kept running, output captured meanwhile, ended when it exits, killable", async () => {
    const first = await startTestAgent();
    const p = (await request(first.url).post("/process").send({ command: "echo before; sleep 0.4; echo after", name: "survivor" }).expect(200)).body;
    await until(async () => (await request(first.url).get("/process/survivor/logs")).body.stdout === "before\n", "first output");
    const second = await restart(first);
    expect((await request(second.url).get(`/process/${p.pid}`).expect(200)).body.status).toBe("running");
    const ended = await second.runtime.deps.processes.waitForExit("survivor");
    expect(ended).toMatchObject({ status: "failed", exitCode: null, error: expect.stringMatching(/agent restarted/) });
    // the child writes its files itself, so what it printed while the agent was away is there
    expect((await request(second.url).get("/process/survivor/logs").expect(200)).body.stdout).toBe("before\nafter\n");

    const third = await startTestAgent();
    const q = (await request(third.url).post("/process").send({ command: "sleep 30", name: "adopted-kill", timeout: 0 }).expect(200)).body;
    const fourth = await restart(third);
    await request(fourth.url).delete("/process/adopted-kill/kill").expect(200);
    expect((await request(fourth.url).get("/process/adopted-kill")).body.status).toBe("killed");
    await until(() => !isAlive(Number(q.pid)), "the adopted process to die");
  });

  it("an adopted process that asked for restarts is not restarted: its exit status is unknown", async () => {
    const first = await startTestAgent();
    const p = (
      await request(first.url)
        .post("/process")
        .send({ command: "sleep 0.5; exit 1", name: "adopted-flaky", restartOnFailure: true, maxRestarts: -1 })
        .expect(200)
    ).body;
    const second = await restart(first);
    const ended = await second.runtime.deps.processes.waitForExit("adopted-flaky");
    expect(ended).toMatchObject({ pid: p.pid, status: "failed", restartCount: 0 });
  });

  it("an adopted process's kill timer (keepAlive with a timeout) is re-armed from its start time", async () => {
    const first = await startTestAgent();
    const p = (await request(first.url).post("/process").send({ command: "sleep 30", name: "deadline", timeout: 5, keepAlive: true }).expect(200)).body;
    await first.stop({ keepFiles: true });
    const clock = new FakeClock(new Date(p.startedAt).getTime() + 4_000);
    const second = await startTestAgent({ root: first.config.root, dataDir: first.dataDir }, { clock });
    agents.push(second);
    expect(second.runtime.deps.processes.get("deadline")!.status).toBe("running");
    clock.advance(1_000);
    expect(await second.runtime.deps.processes.waitForExit("deadline")).toMatchObject({ status: "killed", error: "timed out after 5 seconds" });
    await until(() => !isAlive(Number(p.pid)), "the timed-out process to die");
  });
});
