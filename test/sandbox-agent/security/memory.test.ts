import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";
import { MAX_EVENT_CHARS } from "../../../sandbox-agent/process/stream.js";

/** #14 item 10: no stream buffers without bound, no event is unbounded, list entries are short. */
const agents: AgentProcess[] = [];
const groups: number[] = [];
afterEach(async () => {
  for (const pid of groups.splice(0)) try { process.kill(-pid, "SIGKILL"); } catch { /* gone */ }
  for (const a of agents.splice(0)) { a.child.kill("SIGKILL"); await a.exited; }
});
async function start(): Promise<AgentProcess> {
  const base = tempDir();
  const agent = await spawnAgent(["--root", join(base, "root"), "--data-dir", join(base, "data")]);
  agents.push(agent);
  return agent;
}
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
const post = (url: string, body: object, headers: Record<string, string> = {}) =>
  fetch(`${url}/process`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) });

describe("memory bounds", () => {
  it("a stalled reader of a log stream on `yes` does not grow the agent", async () => {
    const agent = await start();
    const started = (await (await post(agent.url, { command: "yes", name: "flood" })).json()) as { pid: string };
    groups.push(Number(started.pid));
    const before = rssMiB(agent.child.pid!);
    // A reader that never reads: the socket's buffers fill, then the agent must stop queueing.
    const stalled = request(`${agent.url}/process/flood/logs/stream`);
    stalled.on("response", (res) => res.pause());
    stalled.on("error", () => undefined);
    stalled.end();
    await new Promise((r) => setTimeout(r, 3000));
    const grown = rssMiB(agent.child.pid!) - before;
    stalled.destroy();
    expect(grown).toBeLessThan(450); // before #14 item 10: +1.2 GB in 5 s, then a V8 fatal error; now it levels off near +250 MiB (heap headroom)
  }, 60_000);

  it("an exec stream of one long line without a newline is sent in bounded events", async () => {
    const agent = await start();
    const res = await post(agent.url, { command: "head -c 1000000 /dev/zero | tr '\\\\0' a" }, { Accept: "text/event-stream" });
    const lines = (await res.text()).trim().split("\n");
    const events = lines.map((l) => JSON.parse(l) as { type: string; data: string });
    const stdout = events.filter((e) => e.type === "stdout");
    expect(stdout.map((e) => e.data).join("").length).toBe(1_000_000);
    expect(Math.max(...stdout.map((e) => e.data.length))).toBeLessThanOrEqual(MAX_EVENT_CHARS);
    expect(events.at(-1)!.type).toBe("result");
  }, 60_000);

  it("GET /process list entries carry a short tail, and NUL bytes in output are fine", async () => {
    const agent = await start();
    await post(agent.url, { command: "head -c 70000 /dev/zero", name: "nul", waitForCompletion: true });
    const list = (await (await fetch(`${agent.url}/process`)).json()) as { stdout: string }[];
    expect(list).toHaveLength(1);
    expect(list[0]!.stdout.length).toBeLessThan(2048);
    const one = (await (await fetch(`${agent.url}/process/nul`)).json()) as { stdout: string };
    expect(one.stdout.length).toBeGreaterThan(60_000);
  }, 60_000);
});
