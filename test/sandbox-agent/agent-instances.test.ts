import { closeSync, constants, openSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { namespaceSpawner, nsexecPath } from "../../sandbox-agent/process/ns-spawn.js";
import { startTestAgent, type TestAgent } from "../helpers/agent.js";
import { nsSandboxUnavailable, startNsSandbox, type NsSandbox } from "../helpers/ns-sandbox.js";
import { isAlive } from "../../sandbox-agent/process/os.js";
import { O_PATH } from "../../sandbox-agent/paths/beneath.js";
import type { RootDescriptor } from "../../sandbox-agent/paths/sandbox-path.js";
import { openat2Support } from "../../sandbox-agent/paths/openat2.js";

/**
 * Agents as instances in one host process, each serving one sandbox from
 * outside it (the agent host's building block): each instance has its own
 * database, process table and root, starts its commands inside its own
 * sandbox's namespaces, sees nothing of the other's, and leaves no
 * descriptor or handle of the host behind when it is closed.
 */
const SKIP = !nsexecPath()
  ? "native/nsexec is not built (no C compiler): run npm run build"
  : !openat2Support().available
    ? `the openat2 confinement is unavailable: ${(openat2Support() as { reason: string }).reason}`
    : nsSandboxUnavailable();
if (SKIP) console.warn(`[agent instance tests] SKIPPING: ${SKIP}`);
const TOKEN = "instance-token";
const ENV = { PATH: "/usr/bin:/bin", HOME: "/root" };

let sandboxes: NsSandbox[] = [];
beforeAll(async () => {
  if (!SKIP) sandboxes = [await startNsSandbox("sbx-a"), await startNsSandbox("sbx-b")];
});
afterAll(async () => {
  for (const s of sandboxes) await s.stop();
});

/** The sandbox's own view of its root, held: what the instance's files are resolved in (openat2, RESOLVE_IN_ROOT). */
function rootOf(sandbox: NsSandbox): RootDescriptor {
  const fd = openSync(`/proc/${sandbox.pid}/root`, O_PATH | constants.O_DIRECTORY);
  held.push(fd);
  return { fd, label: `/proc/${sandbox.pid}/root` };
}
const held: number[] = [];
afterAll(() => held.forEach((fd) => closeSync(fd)));

function instanceFor(sandbox: NsSandbox, root: RootDescriptor = rootOf(sandbox)): Promise<TestAgent> {
  // bind: an unprivileged agent's auto choice is the symlink backend, which links drives by host path and so
  // cannot serve a root held as a descriptor (always openat2); instances do not mount drives yet.
  return startTestAgent({ token: TOKEN, driveBackend: "bind" }, { root, spawner: namespaceSpawner(() => ({ pid: sandbox.pid })), baseEnv: ENV });
}

async function call(agent: TestAgent, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${agent.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text.startsWith("{") || text.startsWith("[") ? JSON.parse(text) : text };
}

describe.skipIf(SKIP !== "")(`agent instances serving sandboxes from one process${SKIP ? ` [SKIPPED: ${SKIP}]` : ""}`, () => {
  it("each runs its commands in its own sandbox and sees nothing of the other's", async () => {
    const [a, b] = [await instanceFor(sandboxes[0]!), await instanceFor(sandboxes[1]!)];
    try {
      const probe = "hostname; readlink /proc/self/ns/pid; ls /proc | grep -c '^[0-9]'";
      const ranA = await call(a, "POST", "/process", { command: probe, name: "probe", waitForCompletion: true });
      const ranB = await call(b, "POST", "/process", { command: probe, name: "probe", waitForCompletion: true });
      expect(ranA.status).toBe(200);
      const [hostA, nsA] = String(ranA.body.stdout).trim().split("\n");
      const [hostB, nsB] = String(ranB.body.stdout).trim().split("\n");
      expect([hostA, nsA]).toEqual(["sbx-a", readlinkSync(`/proc/${sandboxes[0]!.pid}/ns/pid`)]);
      expect([hostB, nsB]).toEqual(["sbx-b", readlinkSync(`/proc/${sandboxes[1]!.pid}/ns/pid`)]);

      const sleeper = await call(a, "POST", "/process", { command: "sleep 1000", name: "only-in-a" });
      expect(sleeper.status).toBe(200);
      expect((await call(b, "GET", "/process/only-in-a")).status).toBe(404);
      expect((await call(b, "GET", "/process")).body.map((p: { name: string }) => p.name)).toEqual(["probe"]);
      // Sandbox b's processes cannot see a's sleep: only its own PID 1 and what it runs.
      const seen = await call(b, "POST", "/process", { command: "cat /proc/[0-9]*/cmdline | tr '\\0' ' '", waitForCompletion: true });
      expect(seen.body.stdout).not.toContain("sleep 1000");

      expect((await call(a, "PUT", "/filesystem/work/a.txt", { content: "from a" })).status).toBe(200);
      expect(readFileSync(join(sandboxes[0]!.root, "work", "a.txt"), "utf8")).toBe("from a");
      expect((await call(b, "GET", "/filesystem/work/a.txt")).status).toBe(404);
      const catA = await call(b, "POST", "/process", { command: "cat /work/a.txt", waitForCompletion: true });
      expect(catA.body.exitCode).not.toBe(0);

      const hostPid = a.runtime.deps.processes.runOf(Number(sleeper.body.pid))!.runPid;
      await call(a, "DELETE", "/process/only-in-a/kill");
      expect(isAlive(hostPid)).toBe(false);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it("reads and writes files in the sandbox's own view of its root, links resolved inside it", async () => {
    const a = await instanceFor(sandboxes[0]!);
    try {
      // /tmp is a tmpfs that exists only in the sandbox's mount namespace: the host directory has an empty /tmp.
      expect((await call(a, "PUT", "/filesystem/tmp/only-inside.txt", { content: "in the sandbox's tmpfs" })).status).toBe(200);
      expect(readdirSync(join(sandboxes[0]!.root, "tmp"))).toEqual([]);
      const read = await call(a, "POST", "/process", { command: "cat /tmp/only-inside.txt", waitForCompletion: true });
      expect(read.body.stdout).toBe("in the sandbox's tmpfs");
      // A link the sandbox makes to `/` leads to the sandbox's `/`, never the host's.
      await call(a, "POST", "/process", { command: "ln -s / /tmp/up && ln -s /proc/self/root /tmp/self", waitForCompletion: true });
      expect((await call(a, "GET", "/filesystem/tmp/up/work")).status).toBe(200);
      expect((await call(a, "GET", "/filesystem/tmp/up/etc/hostname")).status).toBe(404);
      expect((await call(a, "GET", "/filesystem/tmp/self/etc/hostname")).status).not.toBe(200);
    } finally {
      await a.stop();
    }
  });

  it("opened and closed by the dozen, leave no descriptor or handle of the host", async () => {
    const warmUp = await instanceFor(sandboxes[0]!);
    await call(warmUp, "POST", "/process", { command: "true", waitForCompletion: true });
    await warmUp.stop();
    const fds = () => readdirSync("/proc/self/fd").length;
    const handles = () => process.getActiveResourcesInfo().length;
    const [fds0, handles0] = [fds(), handles()];
    for (let round = 0; round < 3; round++) {
      const roots = Array.from({ length: 8 }, (_, i) => rootOf(sandboxes[i % 2]!));
      const agents = await Promise.all(roots.map((root, i) => instanceFor(sandboxes[i % 2]!, root)));
      for (const agent of agents) {
        const ran = await call(agent, "POST", "/process", { command: "echo $$ > /tmp/pid; cat /tmp/pid", waitForCompletion: true });
        expect(ran.body.status).toBe("completed");
        expect((await call(agent, "GET", "/filesystem/tmp/pid")).status).toBe(200);
      }
      for (const agent of agents) await agent.stop();
      // The host holds each sandbox's root for as long as it serves it, and lets it go with the instance.
      for (const root of roots) closeSync(held.splice(held.indexOf(root.fd), 1)[0]!);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    // At most as many as before (a keep-alive connection of the warm-up may have closed since).
    expect(fds()).toBeLessThanOrEqual(fds0);
    expect(handles()).toBeLessThanOrEqual(handles0);
  });
});
