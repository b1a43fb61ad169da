import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAlive } from "../../../sandbox-agent/process/os.js";
import { kernelConfined, startTestAgent, type TestAgent } from "../../helpers/agent.js";

let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent({ processStopGraceMs: 300, processLogMaxBytes: 4096 });
  mkdirSync(join(agent.root, "work/sub"), { recursive: true });
  writeFileSync(join(agent.root, "work/file.txt"), "x");
});
afterAll(() => agent.stop());

const exec = (body: object) => request(agent.url).post("/process").send(body);
const run = async (body: object) => (await exec({ ...body, waitForCompletion: true }).expect(200)).body;

describe("POST /process", () => {
  it("runs a command to completion with waitForCompletion (reference test: logs == 'hello world\\n')", async () => {
    const body = await run({ command: "echo hello world" });
    expect(body).toMatchObject({ status: "completed", exitCode: 0, error: null, logs: "hello world\n", stdout: "hello world\n", stderr: "" });
    expect(body.pid).toMatch(/^\d+$/);
    expect(body.name).toMatch(/^proc-[a-z0-9]{8}$/);
    expect(new Date(body.completedAt).getTime()).toBeGreaterThanOrEqual(new Date(body.startedAt).getTime());
  });

  it("a non-zero exit is still 200, status failed with the exit code and why", async () => {
    expect(await run({ command: "echo out; echo err >&2; exit 42" })).toMatchObject({
      status: "failed",
      exitCode: 42,
      error: "exited with code 42",
      stdout: "out\n",
      stderr: "err\n",
      logs: "out\nerr\n",
    });
  });

  it("runs through sh -c: pipes, builtins, quoting", async () => {
    expect((await run({ command: "cd /; export A='a b'; printf '%s|' \"$A\" | tr a-z A-Z" })).stdout).toBe("A B|");
  });

  it("merges env over the agent's environment", async () => {
    const body = await run({ command: 'echo "$GREETING"; test -n "$PATH" && echo has-path', env: { GREETING: "hi there" } });
    expect(body.stdout).toBe("hi there\nhas-path\n");
  });

  it("runs in workingDir under the root (absolute or relative), and at the root by default", async () => {
    expect((await run({ command: "pwd -P", workingDir: "/work/sub" })).stdout).toBe(`${join(agent.root, "work/sub")}\n`);
    expect((await run({ command: "pwd -P", workingDir: "work" })).stdout).toBe(`${join(agent.root, "work")}\n`);
    const atRoot = await run({ command: "pwd -P" });
    expect(atRoot.stdout).toBe(`${agent.root}\n`);
    expect(atRoot.workingDir).toBe("/");
  });

  it("a nonexistent workingDir is a 422 naming the command and the folder (reference wording)", async () => {
    const res = await exec({ command: "ls", workingDir: "/nope/deeper" }).expect(422);
    expect(res.body.error).toBe("failed to start process: could not execute command 'ls' because folder '/nope/deeper' does not exist");
    await exec({ command: "ls", workingDir: "missing-rel" }).expect(422, {
      error: "failed to start process: could not execute command 'ls' because folder 'missing-rel' does not exist",
    });
  });

  it("a workingDir that is a file is a 422; one escaping the root is a 403", async () => {
    expect((await exec({ command: "ls", workingDir: "/work/file.txt" }).expect(422)).body.error).toMatch(/'\/work\/file.txt' is not a folder/);
    expect((await exec({ command: "ls", workingDir: "/../.." }).expect(403)).body.error).toMatch(/escapes the sandbox root/);
    symlinkSync(tmpdir(), join(agent.root, "outside-link"));
    if (kernelConfined(agent)) {
      // openat2: the link's absolute target is a sandbox path, as inside the sandbox; the root has no such folder.
      expect((await exec({ command: "ls", workingDir: "/outside-link" }).expect(422)).body.error).toMatch(/does not exist/);
    } else {
      expect((await exec({ command: "ls", workingDir: "/outside-link" }).expect(403)).body.error).toMatch(/resolves outside the sandbox root/);
    }
  });

  it.each([
    [{}, /body\.command/],
    [{ command: "" }, /body\.command/],
    [{ command: 42 }, /body\.command/],
    [{ command: "true", timeout: 1.5 }, /body\.timeout/],
    [{ command: "true", timeout: "10" }, /body\.timeout/],
    [{ command: "true", name: "123" }, /body\.name.*all digits/],
    [{ command: "true", name: "" }, /body\.name/],
    [{ command: "true", name: "a/b" }, /body\.name/],
    [{ command: "true", env: { A: 1 } }, /body\.env\.A/],
    [{ command: "true", env: ["A=1"] }, /body\.env/],
    [{ command: "true", keepAlive: "yes" }, /body\.keepAlive/],
    [{ command: "true", waitForCompletion: "yes" }, /body\.waitForCompletion/],
    [{ command: "true", restartOnFailure: "yes" }, /body\.restartOnFailure/],
    [{ command: "true", maxRestarts: 1.5 }, /body\.maxRestarts/],
    [{ command: "true", waitForPorts: [0] }, /body\.waitForPorts\[0\]/],
    [{ command: "true", waitForPorts: [70000] }, /body\.waitForPorts\[0\]/],
    [{ command: "true", stdin: "yes" }, /body\.stdin/],
  ])("bad input %j → 400 naming the field", async (body, message) => {
    const res = await exec(body).expect(400);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.body.error).toMatch(message);
  });

  it("malformed JSON → 400", async () => {
    const res = await request(agent.url).post("/process").set("Content-Type", "application/json").send("{nope").expect(400);
    expect(res.body.error).toMatch(/invalid JSON/);
  });

  it("a name already running → 409 (the reference answers 400); a finished one may be reused", async () => {
    await exec({ command: "sleep 5", name: "dup" }).expect(200);
    const clash = await exec({ command: "true", name: "dup" }).expect(409);
    expect(clash.body.error).toBe("process with name 'dup' already exists and is running");
    await request(agent.url).delete("/process/dup/kill").expect(200);
    expect(await run({ command: "echo again", name: "dup" })).toMatchObject({ name: "dup", status: "completed" });
    // the name now finds the latest run; the killed one keeps its own output
    expect((await request(agent.url).get("/process/dup").expect(200)).body.stdout).toBe("echo again".slice(5) + "\n");
  });

  it("without waitForCompletion answers at once with status running; keepAlive without timeout means 600 s (SDK default)", async () => {
    const res = await exec({ command: "sleep 0.2", keepAlive: true }).expect(200);
    expect(res.body).toMatchObject({ status: "running", exitCode: 0, completedAt: null, keepAlive: true, timeout: 600 });
    expect((await exec({ command: "true", keepAlive: true, timeout: 0 }).expect(200)).body.timeout).toBe(0);
    expect((await exec({ command: "true", timeout: null }).expect(200)).body.timeout).toBe(0);
  });
});

describe("GET /process, /process/{pidOrName}, /logs", () => {
  it("finds a process by pid and by name; lists it; 404 JSON for unknown ones", async () => {
    const started = await run({ command: "echo listed", name: "listed" });
    const byPid = (await request(agent.url).get(`/process/${started.pid}`).expect(200)).body;
    expect(byPid).toMatchObject({ name: "listed", status: "completed", stdout: "listed\n" });
    expect((await request(agent.url).get("/process/listed").expect(200)).body.pid).toBe(started.pid);
    const list = (await request(agent.url).get("/process").expect(200)).body as { name: string }[];
    expect(list.map((p) => p.name)).toContain("listed");
    expect((await request(agent.url).get("/process/no-such").expect(404)).body).toEqual({ error: "process 'no-such' not found" });
    await request(agent.url).get("/process/999999999").expect(404);
  });

  it("logs keeps stdout and stderr apart, logs = stdout + stderr", async () => {
    const p = await run({ command: "echo one; echo two >&2; echo three", name: "logs-split" });
    expect((await request(agent.url).get(`/process/${p.pid}/logs`).expect(200)).body).toEqual({
      stdout: "one\nthree\n",
      stderr: "two\n",
      logs: "one\nthree\ntwo\n",
    });
    await request(agent.url).get("/process/unknown-proc/logs").expect(404);
  });

  it("output beyond the cap keeps the tail behind a truncation marker", async () => {
    // 10,000 bytes of digits then an end line; the cap is 4096 bytes per stream
    const p = await run({ command: "i=0; while [ $i -lt 1000 ]; do printf 0123456789; i=$((i+1)); done; echo; echo END" });
    const { stdout } = (await request(agent.url).get(`/process/${p.pid}/logs`).expect(200)).body as { stdout: string };
    expect(stdout).toMatch(/^\[output truncated: \d+ earlier bytes dropped\]\n/);
    const body = stdout.slice(stdout.indexOf("\n") + 1);
    expect(body.length).toBe(4096);
    expect(body.endsWith("0123456789\nEND\n")).toBe(true);
    expect(Number(/(\d+) earlier/.exec(stdout)![1])).toBe(10_005 - 4096);
  });
});

describe("stop and kill", () => {
  it("DELETE stops a running process (status stopped); a second stop is 409; unknown is 404", async () => {
    const p = (await exec({ command: "sleep 30", name: "to-stop" }).expect(200)).body;
    expect((await request(agent.url).delete("/process/to-stop").expect(200)).body).toEqual({ message: "Process stopped successfully" });
    expect((await request(agent.url).get(`/process/${p.pid}`)).body).toMatchObject({ status: "stopped", error: "stopped on request", exitCode: -1 });
    expect((await request(agent.url).delete("/process/to-stop").expect(409)).body.error).toMatch(/is not running \(status: stopped\)/);
    await request(agent.url).delete("/process/never-was").expect(404);
  });

  it("stop escalates to SIGKILL after the grace period when SIGTERM is ignored", async () => {
    await exec({ command: "trap '' TERM; while true; do sleep 0.05; done", name: "stubborn" }).expect(200);
    await request(agent.url).delete("/process/stubborn").expect(200);
    expect((await request(agent.url).get("/process/stubborn")).body.status).toBe("stopped");
  });

  it("a stopped group's member that ignores SIGTERM still gets SIGKILL after the grace period; stopping it again is 409", async () => {
    const command = "sh -c 'trap \"\" TERM; echo $$; while true; do sleep 0.05; done' & wait";
    await exec({ command, name: "leaves-one" }).expect(200);
    let child = 0;
    for (let i = 0; i < 250 && !child; i++) {
      child = Number((await request(agent.url).get("/process/leaves-one/logs")).body.stdout.trim());
      if (!child) await new Promise((r) => setTimeout(r, 20));
    }
    await request(agent.url).delete("/process/leaves-one").expect(200);
    expect((await request(agent.url).delete("/process/leaves-one").expect(409)).body.error).toMatch(/is not running \(status: stopped\)/);
    for (let i = 0; i < 250 && isAlive(child); i++) await new Promise((r) => setTimeout(r, 20));
    expect(isAlive(child)).toBe(false);
  });

  it("kill (DELETE /kill, what the SDK sends) reaches the whole process group", async () => {
    const p = (await exec({ command: "sleep 30 & echo $!; sleep 30", name: "tree" }).expect(200)).body;
    let child = 0;
    for (let i = 0; i < 250 && !child; i++) {
      child = Number((await request(agent.url).get(`/process/${p.pid}/logs`)).body.stdout.trim());
      if (!child) await new Promise((r) => setTimeout(r, 20));
    }
    expect(isAlive(child)).toBe(true);
    expect((await request(agent.url).delete("/process/tree/kill").expect(200)).body).toEqual({ message: "Process killed successfully" });
    expect((await request(agent.url).get("/process/tree")).body).toMatchObject({ status: "killed", error: "killed on request" });
    for (let i = 0; i < 250 && isAlive(child); i++) await new Promise((r) => setTimeout(r, 20));
    expect(isAlive(child)).toBe(false);
  });

  it("POST /kill works too; killing an ended process is 409", async () => {
    const p = (await exec({ command: "sleep 30" }).expect(200)).body;
    await request(agent.url).post(`/process/${p.pid}/kill`).expect(200);
    expect((await request(agent.url).get(`/process/${p.pid}`)).body.status).toBe("killed");
    await request(agent.url).post(`/process/${p.pid}/kill`).expect(409);
    await request(agent.url).delete("/process/ghost/kill").expect(404);
  });

  it("stdin routes answer 409 for a known process (none has a stdin pipe), 404 otherwise", async () => {
    const p = await run({ command: "true" });
    await request(agent.url).post(`/process/${p.pid}/stdin`).send({ data: "x" }).expect(409);
    await request(agent.url).post("/process/ghost/stdin").send({ data: "x" }).expect(404);
  });
});

describe("streaming", () => {
  const parseNdjson = (text: string) =>
    text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; data?: string });

  it("POST with Accept: text/event-stream answers NDJSON: stdout/stderr events then the result", async () => {
    const res = await exec({ command: "echo a; sleep 0.1; echo b >&2; echo c; exit 3", name: "streamed" }).set("Accept", "text/event-stream").expect(200);
    expect(res.headers["content-type"]).toMatch(/application\/x-ndjson/);
    const events = parseNdjson(res.text);
    expect(events.filter((e) => e.type === "stdout").map((e) => e.data)).toEqual(["a", "c"]);
    expect(events.filter((e) => e.type === "stderr").map((e) => e.data)).toEqual(["b"]);
    const last = events.at(-1)!;
    expect(last.type).toBe("result");
    expect(JSON.parse(last.data!)).toMatchObject({ name: "streamed", status: "failed", exitCode: 3, stdout: "a\nc\n", stderr: "b\n" });
  });

  it("a client that goes away mid-stream leaves the process running to its end", async () => {
    const controller = new AbortController();
    const res = await fetch(`${agent.url}/process`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ command: "sleep 0.2; echo finished", name: "abandoned" }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    controller.abort();
    let status = "running";
    for (let i = 0; i < 250 && status === "running"; i++) {
      await new Promise((r) => setTimeout(r, 20));
      status = (await request(agent.url).get("/process/abandoned").expect(200)).body.status;
    }
    expect(status).toBe("completed");
    expect((await request(agent.url).get("/process/abandoned/logs")).body.stdout).toBe("finished\n");
  });

  it("the stream refuses bad input before streaming, as a JSON error", async () => {
    const res = await exec({ command: "" }).set("Accept", "text/event-stream").expect(400);
    expect(res.body.error).toMatch(/command/);
    await exec({ command: "true", workingDir: "/missing" }).set("Accept", "text/event-stream").expect(422);
  });

  it("GET /logs/stream replays and follows prefixed lines until the process ends", async () => {
    const p = (await exec({ command: "echo first; sleep 0.2; echo second >&2; echo third" }).expect(200)).body;
    const res = await request(agent.url).get(`/process/${p.pid}/logs/stream`).expect(200);
    expect(res.headers["content-type"]).toMatch(/text\/plain/);
    const lines = res.text.trim().split("\n");
    expect(lines.filter((l) => l.startsWith("stdout:"))).toEqual(["stdout:first", "stdout:third"]);
    expect(lines.filter((l) => l.startsWith("stderr:"))).toEqual(["stderr:second"]);
    // an ended process replays its files
    expect((await request(agent.url).get(`/process/${p.pid}/logs/stream`).expect(200)).text).toContain("stdout:first\n");
    await request(agent.url).get("/process/unknown/logs/stream").expect(404);
  });
});
