import { writeFileSync } from "node:fs";
import { get as get_ } from "node:http";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAlive } from "../../../sandbox-agent/process/os.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { killAll, until } from "./helpers.js";
import { eventually } from "../schedules/eventually.js";

let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent();
});
afterAll(async () => {
  killAll(agent);
  await agent.stop();
});

const exec = (body: object) => request(agent.url).post("/process").send(body);
const get = async (id: string) => (await request(agent.url).get(`/process/${id}`).expect(200)).body;

describe("timeout bounds the waits, it does not kill (reference §4.2)", () => {
  it("waitForCompletion past the timeout → 422 'process timed out after N seconds'; the process keeps running", async () => {
    const res = await exec({ command: "echo started; sleep 30", name: "slow", timeout: 1, waitForCompletion: true }).expect(422);
    expect(res.body).toEqual({ error: "process timed out after 1 seconds" });
    const p = await get("slow");
    expect(p).toMatchObject({ status: "running", timeout: 1, keepAlive: false });
    expect(isAlive(Number(p.pid))).toBe(true);
    await request(agent.url).delete("/process/slow/kill").expect(200);
  });

  it("a plain process with a timeout is never killed by it", async () => {
    const started = (await exec({ command: "sleep 2; echo survived", name: "plain", timeout: 1 }).expect(200)).body;
    expect(started.timeout).toBe(1);
    const ended = await until(async () => {
      const p = await get("plain");
      return p.status !== "running" && p;
    }, "plain to end");
    expect(ended).toMatchObject({ status: "completed", exitCode: 0, stdout: "survived\n" });
  });

  it("keepAlive with a timeout kills the whole group when it expires: status killed", async () => {
    const started = (await exec({ command: "sleep 30 & echo $!; wait", name: "kept", keepAlive: true, timeout: 1 }).expect(200)).body;
    expect(started).toMatchObject({ keepAlive: true, timeout: 1, status: "running" });
    const child = Number(await until(async () => (await get("kept")).stdout.trim(), "the background pid"));
    const ended = await until(async () => {
      const p = await get("kept");
      return p.status !== "running" && p;
    }, "the kill");
    expect(ended).toMatchObject({ status: "killed", error: "timed out after 1 seconds", exitCode: -1 });
    await until(() => !isAlive(child), "the group member to die");
  });

  it("keepAlive without a timeout (or a negative one) means 600 s; timeout 0 means none", async () => {
    expect((await exec({ command: "true", keepAlive: true }).expect(200)).body.timeout).toBe(600);
    expect((await exec({ command: "true", keepAlive: true, timeout: -1 }).expect(200)).body.timeout).toBe(600);
    expect((await exec({ command: "true", keepAlive: true, timeout: 0 }).expect(200)).body.timeout).toBe(0);
    expect((await exec({ command: "true", timeout: -5 }).expect(200)).body.timeout).toBe(0);
  });

  it("a start that does not wait answers logs: null; one that waits carries them", async () => {
    const started = (await exec({ command: "echo early" }).expect(200)).body;
    expect(started.logs).toBeNull();
    expect((await exec({ command: "echo late", waitForCompletion: true }).expect(200)).body.logs).toBe("late\n");
  });
});

describe("restartOnFailure (reference §9.7)", () => {
  it("restarts a failing command maxRestarts times, then failed; pid constant, notices in stdout", async () => {
    const body = (await exec({ command: "echo try; exit 3", name: "flaky", restartOnFailure: true, maxRestarts: 2, waitForCompletion: true }).expect(200)).body;
    expect(body).toMatchObject({ status: "failed", exitCode: 3, restartOnFailure: true, maxRestarts: 2, restartCount: 2 });
    expect(body.stdout).toBe(
      "try\n\n[Process failed with exit code 3. Attempting restart 1/2...]\ntry\n\n[Process failed with exit code 3. Attempting restart 2/2...]\ntry\n",
    );
    expect((await get(body.pid)).name).toBe("flaky");
    const list = (await request(agent.url).get("/process").expect(200)).body as { name: string }[];
    expect(list.filter((p) => p.name === "flaky")).toHaveLength(1);
  });

  it("unlimited (negative maxRestarts) until it succeeds; custom env kept across restarts", async () => {
    writeFileSync(join(agent.root, "count"), "0");
    const command = 'n=$(($(cat count)+1)); echo $n > count; echo "run $n $TOKEN"; [ $n -ge 3 ]';
    const body = (
      await exec({ command, name: "eventual", env: { TOKEN: "kept" }, restartOnFailure: true, maxRestarts: -1, waitForCompletion: true }).expect(200)
    ).body;
    expect(body).toMatchObject({ status: "completed", exitCode: 0, restartCount: 2, maxRestarts: -1 });
    expect(body.stdout).toContain("Attempting restart 1/unlimited...");
    expect(body.stdout).toContain("run 3 kept\n");
  });

  it("maxRestarts 0 and a successful run never restart; stop between runs ends it as stopped", async () => {
    expect((await exec({ command: "exit 1", restartOnFailure: true, waitForCompletion: true }).expect(200)).body).toMatchObject({
      status: "failed",
      restartCount: 0,
    });
    await exec({ command: "exit 1", name: "stopped-flaky", restartOnFailure: true, maxRestarts: -1 }).expect(200);
    await until(async () => (await get("stopped-flaky")).restartCount >= 1, "a restart");
    await request(agent.url).delete("/process/stopped-flaky").expect(200);
    expect(await get("stopped-flaky")).toMatchObject({ status: "stopped" });
  });
});

describe("the log stream", () => {
  it("restart notices arrive raw (unprefixed), as the reference writes them", async () => {
    const started = (await exec({ command: "echo out; exit 1", name: "noisy", restartOnFailure: true, maxRestarts: 1 }).expect(200)).body;
    const text = (
      await request(agent.url)
        .get(`/process/${started.pid}/logs/stream`)
        .buffer(true)
        .parse((res, cb) => {
          let data = "";
          res.on("data", (c: Buffer) => (data += c)).on("end", () => cb(null, data));
        })
        .expect(200)
    ).body as string;
    expect(text).toBe("stdout:out\nstdout:\n[Process failed with exit code 1. Attempting restart 1/1...]\nstdout:out\n");
  });

  /** Follows the log stream of `name`; once `ready` has arrived, runs `act`; resolves with all the stream carried. */
  const followWhile = (name: string, ready: string, act: () => Promise<unknown>) =>
    new Promise<string>((resolve, reject) => {
      let text = "";
      let acted = false;
      get_(`${agent.url}/process/${name}/logs/stream`, (res) => {
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
          if (!acted && text.includes(ready)) {
            acted = true;
            act().catch(reject);
          }
        });
        res.on("end", () => resolve(text));
      }).on("error", reject);
    });

  it("stop and kill notices arrive raw after the output, as the reference pushes them (§4.4); the log files do not hold them", async () => {
    await exec({ command: "echo out; printf partial; sleep 30", name: "to-stop-followed" }).expect(200);
    // Stopped once `partial` is in its log (not merely once `out` arrived: under load the stop could come first).
    const stopped = await followWhile("to-stop-followed", "stdout:out\n", async () => {
      await eventually(
        async () => ((await request(agent.url).get("/process/to-stop-followed/logs")).body as { stdout?: string }).stdout?.includes("partial"),
        10_000,
        "partial in the log",
      );
      await request(agent.url).delete("/process/to-stop-followed").expect(200);
    });
    expect(stopped).toBe("stdout:out\nstdout:partial\n\n[Process is being gracefully terminated]\n");
    await exec({ command: "echo out; sleep 30", name: "to-kill-followed" }).expect(200);
    const killed = await followWhile("to-kill-followed", "stdout:out\n", () => request(agent.url).delete("/process/to-kill-followed/kill").expect(200));
    expect(killed).toBe("stdout:out\n\n[Process is being forcefully killed]\n");
    expect((await request(agent.url).get("/process/to-kill-followed/logs").expect(200)).body).toMatchObject({ stdout: "out\n", logs: "out\n" });
    // a stream opened after the end replays the files alone
    expect((await request(agent.url).get("/process/to-stop-followed/logs/stream").expect(200)).text).toBe("stdout:out\nstdout:partial\n");
  });
});

describe("BL_DISABLE_KEEPALIVE", () => {
  it("keepAlive is refused with the reference's 400; other starts work", async () => {
    const limited = await startTestAgent({ keepAliveDisabled: true });
    try {
      const res = await request(limited.url).post("/process").send({ command: "true", keepAlive: true }).expect(400);
      expect(res.body).toEqual({ error: "keepAlive is not available for this sandbox: it is not included in your current plan" });
      await request(limited.url).post("/process").send({ command: "true", waitForCompletion: true }).expect(200);
    } finally {
      await limited.stop();
    }
  });
});
