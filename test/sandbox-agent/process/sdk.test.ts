import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { sandboxAt } from "../../helpers/sdk.js";

const TOKEN = "sdk-process-token";
let agent: TestAgent;
let sandbox: Awaited<ReturnType<typeof sandboxAt>>;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  sandbox = await sandboxAt(agent.url, "t", { apiKey: TOKEN });
});
afterAll(() => agent.stop());

describe("@blaxel/core sandbox.process against the agent", () => {
  it("exec with waitForCompletion returns the finished process and its output", async () => {
    const result = await sandbox.process.exec({ command: "echo hello world; echo oops >&2; exit 7", name: "sdk-exec", waitForCompletion: true });
    expect(result).toMatchObject({ name: "sdk-exec", status: "failed", exitCode: 7, stdout: "hello world\n", stderr: "oops\n", logs: "hello world\noops\n" });
  });

  it("exec with onLog callbacks and waitForCompletion streams lines (NDJSON) and returns the result", async () => {
    const logs: string[] = [];
    const stdout: string[] = [];
    const stderr: string[] = [];
    const result = await sandbox.process.exec({
      command: "echo one; sleep 0.1; echo two >&2; echo three",
      waitForCompletion: true,
      onLog: (l: string) => logs.push(l),
      onStdout: (l: string) => stdout.push(l),
      onStderr: (l: string) => stderr.push(l),
    });
    expect(result.status).toBe("completed");
    expect(stdout).toEqual(["one", "three"]);
    expect(stderr).toEqual(["two"]);
    expect([...logs].sort()).toEqual(["one", "three", "two"]);
  });

  it("exec without waiting, then get, wait and logs", async () => {
    const started = await sandbox.process.exec({ command: "sleep 0.2; echo done", name: "sdk-wait" });
    expect(started.status).toBe("running");
    expect((await sandbox.process.get("sdk-wait")).pid).toBe(started.pid);
    const finished = await sandbox.process.wait(started.pid, { maxWait: 10_000, interval: 50 });
    expect(finished).toMatchObject({ status: "completed", exitCode: 0 });
    expect(await sandbox.process.logs("sdk-wait")).toBe("done\n");
    expect(await sandbox.process.logs("sdk-wait", "stdout")).toBe("done\n");
    expect(await sandbox.process.logs("sdk-wait", "stderr")).toBe("");
    expect((await sandbox.process.list()).map((p) => p.name)).toContain("sdk-wait");
  });

  it("exec with onLog but no wait follows /logs/stream", async () => {
    const lines: string[] = [];
    const started = await sandbox.process.exec({ command: "echo streamed; sleep 0.1; echo more >&2", onLog: (l: string) => lines.push(l) });
    await sandbox.process.wait(started.pid, { maxWait: 10_000, interval: 50 });
    for (let i = 0; i < 250 && lines.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(lines).toEqual(["streamed", "more"]);
    (started as { close?: () => void }).close?.();
  });

  it("kill and stop", async () => {
    await sandbox.process.exec({ command: "sleep 30", name: "sdk-kill" });
    await sandbox.process.kill("sdk-kill");
    expect((await sandbox.process.get("sdk-kill")).status).toBe("killed");
    await sandbox.process.exec({ command: "sleep 30", name: "sdk-stop" });
    await sandbox.process.stop("sdk-stop");
    expect((await sandbox.process.get("sdk-stop")).status).toBe("stopped");
    await expect(sandbox.process.get("sdk-nope")).rejects.toThrow(/not found|404/);
  });
});
