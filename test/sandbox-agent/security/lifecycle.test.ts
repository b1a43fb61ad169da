import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AGENT_MAIN, spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";

const started: AgentProcess[] = [];
afterEach(() => {
  for (const a of started.splice(0)) if (a.child.exitCode === null && a.child.signalCode === null) a.child.kill("SIGKILL");
});
const start = async (args: string[]) => {
  const agent = await spawnAgent(args);
  started.push(agent);
  return agent;
};

/** Runs the built agent to its end; resolves with its exit code and stderr. */
function runToExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [AGENT_MAIN, "--port", "0", "--log-level", "warn", ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (code) => resolve({ code, stderr }));
  });
}

describe("one data dir, one agent", () => {
  it("a second agent on the same --data-dir exits 1 with one line; after kill -9 of the first a new one starts", async () => {
    const base = tempDir();
    const args = ["--root", join(base, "root"), "--data-dir", join(base, "data")];
    const first = await start(args);
    const second = await runToExit(args);
    expect(second.code).toBe(1);
    expect(second.stderr.trim().split("\n")).toEqual([
      `sandbox-agent: another sandbox-agent (pid ${first.child.pid}) is already running on --data-dir ${join(base, "data")}; stop it first (one data dir, one agent)`,
    ]);
    first.child.kill("SIGKILL");
    await first.exited;
    const third = await start(args);
    expect((await fetch(`${third.url}/health`)).status).toBe(200);
  }, 60_000);
});

/** Waits until `predicate` holds on the agent's stderr (log lines). */
async function stderrShows(agent: AgentProcess, text: string): Promise<void> {
  while (!agent.stderr().includes(text)) await new Promise((r) => setTimeout(r, 20));
}

describe("shutdown with open streams", () => {
  it("SIGINT ends a log-stream follower cleanly at once and exits 0", async () => {
    const base = tempDir();
    const agent = await start(["--root", join(base, "root"), "--data-dir", join(base, "data")]);
    const started = await fetch(`${agent.url}/process`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ command: "echo hello; sleep 60", name: "long" }),
    }).then((r) => r.json() as Promise<{ pid: string }>);
    try {
      const follow = await fetch(`${agent.url}/process/long/logs/stream`);
      const reader = follow.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).toContain("stdout:hello");
      agent.child.kill("SIGINT");
      // A clean end of the chunked body (done), not a connection cut mid-stream (which rejects).
      let text = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      expect(text).not.toContain("error");
      expect(await agent.exited).toBe(0);
    } finally {
      try {
        process.kill(-Number(started.pid), "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  }, 60_000);

  it("a second SIGINT exits at once (130) while a request holds the graceful stop", async () => {
    const base = tempDir();
    const agent = await start(["--root", join(base, "root"), "--data-dir", join(base, "data"), "--log-level", "info"]);
    const { request } = await import("node:http");
    // An upload whose body never completes: the graceful stop waits for it.
    const upload = request(`${agent.url}/filesystem/slow.bin`, {
      method: "PUT",
      headers: { "Content-Type": "application/octet-stream", "Content-Length": "1000000" },
    });
    upload.on("error", () => undefined);
    upload.write(Buffer.alloc(1000));
    // The request has reached the agent once its temp file exists.
    while (!readdirSync(join(base, "root")).some((n) => n.endsWith(".tmp"))) await new Promise((r) => setTimeout(r, 20));
    agent.child.kill("SIGINT");
    await stderrShows(agent, "shutting down");
    agent.child.kill("SIGINT");
    expect(await agent.exited).toBe(130);
    upload.destroy();
  }, 60_000);
});
