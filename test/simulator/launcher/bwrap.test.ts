import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BwrapLauncher, bwrapPath, type AgentHandle } from "../../../simulator/launcher/index.js";
import { isAlive } from "../../../simulator/launcher/proc.js";
import { exec, specFor, tempBase } from "./helpers.js";

// .ci/run installs bubblewrap where it is missing; a machine without it (or without namespaces) says so here.
const available = bwrapPath() !== undefined;
if (!available) console.warn("bwrap launcher tests skipped: bubblewrap is not installed (apt-get install -y bubblewrap)");

describe.skipIf(!available)("bwrap launcher", () => {
  const base = tempBase("bwrap-");
  const running: AgentHandle[] = [];
  afterAll(async () => {
    await Promise.all(running.map((h) => h.stop(2_000)));
    rmSync(base, { recursive: true, force: true });
  });

  async function start(name: string) {
    const spec = specFor(base, name, { drivesDir: join(base, "drives") });
    const agent = await new BwrapLauncher().start(spec);
    running.push(agent);
    return { spec, agent };
  }

  it("runs the agent with the sandbox's directory as / and the host's system read-only", async () => {
    const { spec, agent } = await start("iso-a");
    writeFileSync(join(spec.rootDir, "marker.txt"), "in a");
    const ls = await exec(agent.url, spec.token, "cat /marker.txt; ls /; echo $$; test -w /usr && echo usr-writable || echo usr-readonly");
    expect(ls.stdout).toContain("in a");
    expect(ls.stdout).toContain("usr-readonly");
    expect(ls.stdout).not.toMatch(/^home$/m); // the host's own top-level directories are not there
    // The agent's API sees the same `/`.
    const res = await fetch(`${agent.url}/filesystem/marker.txt`, { headers: { authorization: `Bearer ${spec.token}` } });
    expect(((await res.json()) as { content: string }).content).toBe("in a");
  });

  it("one sandbox cannot see another sandbox's files or processes", async () => {
    const a = await start("iso-b");
    const b = await start("iso-c");
    writeFileSync(join(b.spec.rootDir, "secret-of-c.txt"), "c only");
    // A long-lived process in c, then look for it (and its file) from b.
    await exec(b.agent.url, b.spec.token, "sleep 300 & echo started");
    const listing = await exec(a.agent.url, a.spec.token, "ls -a /");
    expect(listing.stdout).not.toContain("secret-of-c.txt");
    const read = await exec(a.agent.url, a.spec.token, `cat ${b.spec.rootDir}/secret-of-c.txt 2>/dev/null || echo absent`);
    expect(read.stdout.trim()).toBe("absent");
    // [3] keeps grep's own command line from matching.
    const ps = await exec(a.agent.url, a.spec.token, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c 'sleep [3]00'");
    expect(ps.stdout.trim()).toBe("0");
    const inB = await exec(b.agent.url, b.spec.token, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c 'sleep [3]00'");
    expect(inB.stdout.trim()).toBe("1");
    const fromB = await exec(a.agent.url, a.spec.token, "ls /proc | grep -c '^[0-9]'");
    // Only the namespace's own processes: bwrap's init, the agent, the shell and its children.
    const processCount = Number(fromB.stdout.trim().split("\n").pop());
    expect(processCount).toBeLessThan(10);
  });

  it("stop delivers SIGTERM to the agent inside: it exits cleanly and the namespace is gone", async () => {
    const { spec, agent } = await start("iso-stop");
    await exec(agent.url, spec.token, "sleep 300 & echo started");
    const exit = await agent.stop(5_000);
    expect(exit.code).toBe(0);
    expect(isAlive(agent.pid!)).toBe(false);
    expect(existsSync(join(spec.dataDir, "launcher.pid"))).toBe(false);
  });
});
