import { readdirSync } from "node:fs";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { killAll, until } from "./helpers.js";

let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent();
});
afterAll(async () => {
  killAll(agent);
  await agent.stop();
});

const exec = (body: object) => request(agent.url).post("/process").send(body);
const write = (id: string, data: string | Buffer) => request(agent.url).post(`/process/${id}/stdin`).set("Content-Type", "application/octet-stream").send(data);

describe("stdin (reference §9.8)", () => {
  it("stdin: true → a pipe; writes arrive verbatim and in order; DELETE sends EOF and the loop ends completed", async () => {
    const started = (await exec({ command: 'while IFS= read -r l; do echo "got:$l"; done; echo eof', name: "echo-loop", stdin: true }).expect(200)).body;
    expect(started).toMatchObject({ stdin: true, status: "running" });
    expect((await write("echo-loop", "one\n").expect(200)).body).toEqual({ message: "4 bytes written to stdin", path: "" });
    await write(started.pid, "two\nthr").expect(200);
    await write("echo-loop", "ee\n").expect(200);
    expect((await request(agent.url).delete("/process/echo-loop/stdin").expect(200)).body).toEqual({ message: "stdin closed", path: "" });
    const ended = await until(async () => {
      const p = (await request(agent.url).get("/process/echo-loop")).body;
      return p.status !== "running" && p;
    }, "EOF to end the loop");
    expect(ended).toMatchObject({ status: "completed", stdout: "got:one\ngot:two\ngot:three\neof\n" });
  });

  it("binary bytes go through untouched; a JSON content type is not parsed", async () => {
    await exec({ command: "od -An -tx1", name: "od", stdin: true }).expect(200);
    await write("od", Buffer.from([0, 1, 0xff, 0x0a])).expect(200);
    await request(agent.url).post("/process/od/stdin").set("Content-Type", "application/json").send('{"a":1}').expect(200);
    await request(agent.url).delete("/process/od/stdin").expect(200);
    const done = await until(async () => {
      const p = (await request(agent.url).get("/process/od")).body;
      return p.status === "completed" && p;
    }, "od");
    expect(done.stdout.replace(/\s+/g, " ").trim()).toBe("00 01 ff 0a 7b 22 61 22 3a 31 7d");
  });

  it("errors: closed → 409, ended → 409, started without stdin → 409, unknown → 404, over 8 MiB → 413; DELETE is idempotent", async () => {
    await exec({ command: "sleep 30", name: "closed-in", stdin: true }).expect(200);
    await request(agent.url).delete("/process/closed-in/stdin").expect(200);
    await request(agent.url).delete("/process/closed-in/stdin").expect(200);
    expect((await write("closed-in", "late\n").expect(409)).body.error).toMatch(/stdin of process 'closed-in' is closed/);
    await exec({ command: "true", name: "ended-in", stdin: true, waitForCompletion: true }).expect(200);
    expect((await write("ended-in", "x").expect(409)).body.error).toMatch(/has ended/);
    await request(agent.url).delete("/process/ended-in/stdin").expect(200);
    await exec({ command: "sleep 30", name: "no-in" }).expect(200);
    expect((await write("no-in", "x").expect(409)).body.error).toMatch(/not started with stdin: true/);
    await request(agent.url).delete("/process/no-in/stdin").expect(409);
    await write("nobody", "x").expect(404);
    await request(agent.url).delete("/process/nobody/stdin").expect(404);
    await exec({ command: "cat > /dev/null", name: "big-in", stdin: true }).expect(200);
    await write("big-in", Buffer.alloc(8 * 1024 * 1024 + 1)).expect(413);
    await request(agent.url).delete("/process/closed-in/kill").expect(200);
    await request(agent.url).delete("/process/no-in/kill").expect(200);
    await request(agent.url).delete("/process/big-in/kill").expect(200);
  });

  it("an ended process's pipe is released (no descriptor left open per process)", async () => {
    const fds = () => readdirSync("/proc/self/fd").length;
    await exec({ command: "true", stdin: true, waitForCompletion: true }).expect(200); // warm-up: lazily opened descriptors
    const before = fds();
    for (let i = 0; i < 20; i++) await exec({ command: "true", stdin: true, waitForCompletion: true }).expect(200);
    expect(fds()).toBeLessThan(before + 10);
  });

  it("a process that closes its stdin makes later writes 409", async () => {
    await exec({ command: "exec 0<&-; sleep 30", name: "shut", stdin: true }).expect(200);
    await until(async () => (await write("shut", "x\n")).status === 409, "EPIPE to be seen");
    await request(agent.url).delete("/process/shut/kill").expect(200);
  });
});
