import { readdirSync, readFileSync } from "node:fs";
import { get, type IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";
import { eventually } from "../schedules/eventually.js";
import { MAX_EVENT_CHARS } from "../../../sandbox-agent/process/follow.js";

/** No stream buffers without bound, no event is unbounded, list entries are short. */
const agents: AgentProcess[] = [];
const groups: number[] = [];
afterEach(async () => {
  for (const pid of groups.splice(0))
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      /* gone */
    }
  for (const a of agents.splice(0)) {
    a.child.kill("SIGKILL");
    await a.exited;
  }
});
async function start(): Promise<AgentProcess> {
  const base = tempDir();
  const agent = await spawnAgent(["--root", join(base, "root"), "--data-dir", join(base, "data")]);
  agents.push(agent);
  return agent;
}
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
/** Bytes written by every live process of a process group (the command's shell and what it started). */
function groupWrites(group: number): number {
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // state ppid pgrp …
      if (Number(fields[2]) !== group) continue;
      total += Number(/wchar:\s+(\d+)/.exec(readFileSync(`/proc/${entry}/io`, "utf8"))![1]);
    } catch {
      /* gone meanwhile */
    }
  }
  return total;
}
const post = (url: string, body: object, headers: Record<string, string> = {}) =>
  fetch(`${url}/process`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) });

describe("memory bounds", () => {
  /**
   * Samples the agent's RSS for `ms` while a reader that never reads holds `path` open on `yes`; returns the
   * peak growth over the agent's idle RSS (MiB) and how much `yes` wrote meanwhile (it must not be held up).
   */
  async function stalledReader(stall: (agent: AgentProcess) => Promise<{ socket: Socket; pid: () => number }>, ms: number) {
    const agent = await start();
    await new Promise((r) => setTimeout(r, 500));
    const idle = rssMiB(agent.child.pid!);
    const { socket, pid } = await stall(agent);
    let peak = idle;
    const written = () => groupWrites(pid());
    await new Promise((r) => setTimeout(r, 500));
    const wroteBefore = written();
    for (let t = 0; t < ms; t += 250) {
      await new Promise((r) => setTimeout(r, 250));
      peak = Math.max(peak, rssMiB(agent.child.pid!));
    }
    const wrote = written() - wroteBefore;
    // How the process stands, for the message when it wrote too little: a flood that stopped (a full disk ends
    // `yes` with ENOSPC; a zombie not yet reaped keeps its last counters) is told apart from one held up.
    let state: string | undefined;
    try {
      state = /State:\s+(.*)/.exec(readFileSync(`/proc/${pid()}/status`, "utf8"))?.[1];
    } catch (e) {
      state = (e as Error).message;
    }
    const record = await fetch(`${agent.url}/process/${pid()}`).then(
      (r) => r.text(),
      (e: Error) => e.message,
    );
    socket.destroy();
    return { grown: peak - idle, wroteMiB: wrote / 1024 / 1024, why: `process state ${state}; agent's record ${record.slice(0, 2000)}` };
  }

  /** A raw client that sends `head` and stops reading once the response starts (its buffers, then the kernel's, fill). */
  function stalledClient(url: string, head: string): Promise<Socket> {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    socket.write(head);
    return new Promise((resolve) =>
      socket.once("data", () => {
        socket.pause();
        resolve(socket);
      }),
    );
  }

  it("a stalled reader of GET /process/{id}/logs/stream on `yes` keeps the agent within 64 MiB of idle, and yes runs on", async () => {
    const { grown, wroteMiB, why } = await stalledReader(async (agent) => {
      const started = (await (await post(agent.url, { command: "yes", name: "flood" })).json()) as { pid: string };
      groups.push(Number(started.pid));
      const socket = await stalledClient(agent.url, "GET /process/flood/logs/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      return { socket, pid: () => Number(started.pid) };
    }, 8_000);
    // Before: +240 MiB in 20 s (the agent split gigabytes into lines nobody read, then queued 8 MiB of them as tiny strings).
    expect(grown).toBeLessThanOrEqual(64);
    expect(wroteMiB, why).toBeGreaterThan(10); // the process writes to files: one slow reader never blocks it
  }, 60_000);

  it("a stalled reader of the NDJSON exec stream (POST /process, Accept: text/event-stream) on `yes` stays within 64 MiB too", async () => {
    let pid = 0;
    const { grown } = await stalledReader(async (agent) => {
      const body = JSON.stringify({ command: "yes", name: "flood-exec" });
      const socket = await stalledClient(
        agent.url,
        `POST /process HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      const record = (await (await fetch(`${agent.url}/process/flood-exec`)).json()) as { pid: string };
      pid = Number(record.pid);
      groups.push(pid);
      return { socket, pid: () => pid };
    }, 8_000);
    expect(grown).toBeLessThanOrEqual(64);
  }, 60_000);

  it("a reader that stalls, then reads again, is told what it missed and follows on; the stored log is whole", async () => {
    const agent = await start();
    const started = (await (await post(agent.url, { command: "seq -f line-%.0f 1 1000000000", name: "counter" })).json()) as { pid: string };
    groups.push(Number(started.pid));
    // An HTTP client this time (chunked framing decoded), paused once the response starts.
    const res = await new Promise<IncomingMessage>((resolve) => get(`${agent.url}/process/counter/logs/stream`, resolve));
    res.pause();
    await new Promise((r) => setTimeout(r, 3_000));
    let text = "";
    res.setEncoding("latin1");
    res.on("data", (d: string) => (text += d));
    res.resume();
    const numbered = (lines: string[]) =>
      lines
        .map((l) => /^stdout:line-(\d+)$/.exec(l)?.[1])
        .filter((n) => n !== undefined)
        .map(Number);
    const afterMarker = () => {
      const at = text.indexOf("the reader was too slow]\n");
      return at === -1 ? undefined : numbered(text.slice(at).split("\n").slice(1, 1000));
    };
    await eventually(async () => (afterMarker()?.length ?? 0) >= 100, 20_000, "the marker, then lines");
    res.destroy();
    // Numbers keep rising across the gap: the reader resumed from the output as it is now, nothing replayed.
    const before = numbered(text.slice(0, text.lastIndexOf("\n", text.indexOf("the reader was too slow]"))).split("\n"));
    const after = afterMarker()!;
    expect(text).toMatch(/\[output dropped: \d+ bytes, the reader was too slow\]\n/);
    expect(after[0]!).toBeGreaterThan(before.at(-1)!);
    expect(after.every((n, i) => i === 0 || n > after[i - 1]!)).toBe(true);
    const logs = (await (await fetch(`${agent.url}/process/counter/logs`)).json()) as { stdout: string };
    expect(logs.stdout.length).toBeGreaterThan(1024 * 1024);
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
