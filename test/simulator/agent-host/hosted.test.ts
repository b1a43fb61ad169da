import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { agentHostSupport } from "../../../simulator/agent-host/host.js";
import { isolationUnavailable, pidNamespaceOf, pidsInNamespace } from "../../helpers/sandbox-procs.js";
import { eventually, isAlive } from "../launcher/helpers.js";

/**
 * The agent host (the default under bwrap where it can run): a sandbox runs no Node process, its API is an
 * instance in the simulator's process, its commands run inside it. Checked by pid and by the host's own
 * descriptors: 200 sandboxes started, each answering a file read and a command, half of them put to sleep and
 * woken by concurrent requests of which none fails, then deleted, leaving no process, mount or descriptor.
 */
const support = agentHostSupport();
const SKIP = isolationUnavailable ?? (support.available ? undefined : support.reason);
if (SKIP) console.warn(`[agent host tests] SKIPPING: ${SKIP}`);

const KEY = "agent-host-admin-key";
const WS = "hosted";
let sim: ServedSimulator;
// No keep-alive: this test counts the process's descriptors, and its own idle client connections are not the host's.
const auth = { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, connection: "close" };

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: /^[[{]/.test(text) ? JSON.parse(text) : text };
}
const create = (name: string) => call("POST", "/v0/sandboxes", { metadata: { name }, spec: { runtime: { memory: 2048 } } });
const agent = (name: string, method: string, path: string, body?: unknown) => call(method, `/sbx/${WS}/${name}${path}`, body);
const exec = (name: string, command: string) => agent(name, "POST", "/process", { command, waitForCompletion: true });

function hostFds(): number {
  return readdirSync("/proc/self/fd").length;
}
/** What the host's descriptors are (for a failure's message). */
function fdTargets(): string[] {
  return readdirSync("/proc/self/fd").map((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return "gone";
    }
  });
}
function mountCount(): number {
  return readFileSync("/proc/self/mountinfo", "utf8").trim().split("\n").length;
}
const comm = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
};

beforeAll(async () => {
  if (SKIP) return;
  sim = await serveSimulator({
    port: 0,
    imageSource: "host",
    apiKey: KEY,
    workspace: WS,
    logLevel: "silent",
    testHooks: true,
    standbyAfterMs: 0,
    agentMode: "host",
  });
});
afterAll(async () => {
  await sim?.stop();
});

describe.skipIf(SKIP !== undefined)(`sandboxes served by the agent host${SKIP ? ` [SKIPPED: ${SKIP}]` : ""}`, () => {
  it("/health says the host serves them; a sandbox's processes are bwrap's init and the idle one, no Node", async () => {
    const health = (await (await fetch(`${sim.url}/health`)).json()) as { sandboxes: { agents: unknown } };
    expect(health.sandboxes.agents).toEqual({ mode: "host" });
    expect((await create("lean")).status).toBe(200);
    const pid1 = sim.agents.get(WS, "lean")!.sandboxPid!;
    const members = pidsInNamespace(pidNamespaceOf(pid1)!);
    expect(members.map(comm).sort()).toEqual(["bwrap", "nsexec"]);
    expect(members.map(comm)).not.toContain("node");
  });

  it("serves files and commands, and localhost:8080 inside without a token; commands never see the agent's state", async () => {
    await create("worker");
    expect((await agent("worker", "PUT", "/filesystem/tmp/hello.txt", { content: "from the API" })).status).toBe(200);
    const ran = await exec("worker", "cat /tmp/hello.txt; echo; curl -s localhost:8080/filesystem/tmp/hello.txt; echo; ls /run/sandbox-agent");
    expect(ran.status).toBe(200);
    const [file, inside, data] = String(ran.body.stdout).split("\n");
    expect(file).toBe("from the API");
    expect(JSON.parse(inside!)).toMatchObject({ content: "from the API" });
    // Only the files the sandbox itself reads (its resolver, hosts, trust) are there: no database, no secrets key.
    expect(data).toBe("etc");
  });

  it("mounts drives in the sandbox's own mount namespace: shared between sandboxes, the host's mount table untouched", async () => {
    expect((await call("POST", "/v0/drives", { metadata: { name: "shared" }, spec: {} })).status).toBeLessThan(300);
    await create("worker");
    await create("drive-a");
    const mounted = await agent("worker", "POST", "/drives/mount", { driveName: "shared", mountPath: "/mnt/shared", drivePath: "/sub" });
    expect(mounted.status, JSON.stringify(mounted.body)).toBe(200);
    expect((await agent("drive-a", "POST", "/drives/mount", { driveName: "shared", mountPath: "/data", drivePath: "/sub", readOnly: true })).status).toBe(200);
    expect((await exec("worker", "echo shared-ok > /mnt/shared/f.txt && grep /mnt/shared /proc/self/mountinfo | wc -l")).body.stdout.trim()).toBe("1");
    expect((await agent("drive-a", "GET", "/filesystem/data/f.txt")).body.content).toBe("shared-ok\n");
    expect((await exec("drive-a", "echo no > /data/g.txt")).body.exitCode).not.toBe(0);
    expect((await agent("drive-a", "GET", "/drives/mount")).body).toMatchObject({ mounts: [{ driveName: "shared", mountPath: "/data", readOnly: true }] });
    // Kernel mounts, made in the sandboxes' namespaces: none in the host's own table.
    expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toMatch(/ \/(mnt\/shared|data) /);
    // The workspace's drives directory is covered inside (its processes see the drives they mount, no other): a
    // drive's files are out of reach until it is mounted, and nothing can be mounted over the cover.
    expect((await call("POST", "/v0/drives", { metadata: { name: "private" }, spec: {} })).status).toBeLessThan(300);
    const seen = await exec(
      "worker",
      "ls -A /run/sandbox-drives | wc -l; cat /run/sandbox-drives/shared/sub/f.txt 2>&1; umount /run/sandbox-drives 2>&1 || echo kept",
    );
    expect(seen.body.stdout).not.toContain("shared-ok");
    expect(seen.body.stdout.split("\n")[0]).toBe("0");
    expect(seen.body.stdout).toContain("kept");
    const over = await agent("worker", "POST", "/drives/mount", { driveName: "shared", mountPath: "/run/sandbox-drives/x" });
    expect(over.status, JSON.stringify(over.body)).toBeGreaterThanOrEqual(400);
    expect(over.status).toBeLessThan(500);
    expect((await agent("worker", "DELETE", "/drives/mount/mnt/shared")).status).toBe(200);
    expect((await exec("worker", "grep -c /mnt/shared /proc/self/mountinfo")).body.stdout.trim()).toBe("0");
    expect((await agent("drive-a", "DELETE", "/drives/mount/data")).status).toBe(200);
  });

  it("two sandboxes see nothing of each other's files, processes or records", async () => {
    await create("left");
    await create("right");
    await agent("left", "PUT", "/filesystem/tmp/only-left.txt", { content: "left" });
    await agent("left", "POST", "/process", { command: "sleep 600", name: "left-sleeper" });
    expect((await agent("right", "GET", "/filesystem/tmp/only-left.txt")).status).toBe(404);
    expect((await agent("right", "GET", "/process/left-sleeper")).status).toBe(404);
    const seen = await exec("right", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '");
    expect(seen.body.stdout).not.toContain("sleep 600");
  });

  it("200 sandboxes start and answer; 100 put to sleep all answer concurrent requests; deleted, they leave nothing", async () => {
    const baseline = { fds: hostFds(), mounts: mountCount(), targets: fdTargets() };
    const names = Array.from({ length: 200 }, (_, i) => `many-${i}`);
    for (let i = 0; i < names.length; i += 20) {
      const batch = await Promise.all(names.slice(i, i + 20).map(create));
      expect(batch.map((r) => (r.status === 200 ? 200 : JSON.stringify(r.body)))).toEqual(batch.map(() => 200));
    }
    const answers = await Promise.all(names.map((n) => exec(n, "hostname")));
    expect(answers.map((a) => String(a.body.stdout).trim())).toEqual(names);

    const sleepers = names.slice(0, 100);
    const slept = await Promise.all(sleepers.map((n) => call("POST", "/_sim/standby", { workspace: WS, sandbox: n, state: "STANDBY" })));
    expect(slept.map((r) => r.body.state)).toEqual(sleepers.map(() => "STANDBY"));
    // Every request across the wake is answered: files (the instance never slept) and commands (after the thaw).
    const woken = await Promise.all(sleepers.flatMap((n) => [agent(n, "GET", "/filesystem/tmp"), exec(n, "echo awake")]));
    expect(woken.map((r) => (r.status === 200 ? 200 : JSON.stringify(r.body).slice(0, 300)))).toEqual(woken.map(() => 200));

    const chains = names.map((n) => ({ pid: sim.agents.get(WS, n)!.pid!, ns: pidNamespaceOf(sim.agents.get(WS, n)!.sandboxPid!)! }));
    const deleted = await Promise.all(names.map((n) => call("DELETE", `/v0/sandboxes/${n}`)));
    expect(deleted.map((r) => r.status)).toEqual(deleted.map(() => 200));
    await eventually(() => chains.every((c) => !isAlive(c.pid) && pidsInNamespace(c.ns).length === 0), 60_000);
    await eventually(() => hostFds() <= baseline.fds, 30_000).catch(() => undefined);
    const extra = fdTargets().filter((t) => !baseline.targets.includes(t));
    expect(hostFds() <= baseline.fds ? [] : extra.slice(0, 20)).toEqual([]);
    expect(mountCount()).toBe(baseline.mounts);
  }, 600_000);
});
