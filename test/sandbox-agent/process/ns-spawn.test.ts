import { existsSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/clock.js";
import { silentLogger } from "../../../src/logging.js";
import { migrate, openDatabase, type Db } from "../../../src/sqlite.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { ProcessManager } from "../../../sandbox-agent/process/manager.js";
import { capabilityMask, namespaceSpawner, NamespaceEntryError, nsexecPath, type NamespaceTarget } from "../../../sandbox-agent/process/ns-spawn.js";
import { groupAlive, isAlive } from "../../../sandbox-agent/process/os.js";
import { LogFiles } from "../../../sandbox-agent/process/output.js";
import { execute } from "../../../sandbox-agent/process/execute.js";
import { portsOfTree } from "../../../sandbox-agent/ports/sockets.js";
import { PROCESS_MIGRATIONS } from "../../../sandbox-agent/process/process-store.js";
import { tempDir } from "../../helpers/agent.js";
import { nsSandboxUnavailable, startNsSandbox, type NsSandbox } from "../../helpers/ns-sandbox.js";
import { pidNamespaceOf, pidsInNamespace } from "../../helpers/sandbox-procs.js";
import { until } from "./helpers.js";

/**
 * Commands an agent host starts from outside a sandbox, through native/nsexec:
 * each runs in the sandbox's namespaces (checked against its PID 1's, by pid),
 * sees the sandbox's `/`, is known by its pid inside and signalled by its host
 * pid's group, and keeps the process manager's semantics (stdin, exit codes,
 * restarts, kill of the whole tree).
 */
const HELPER = nsexecPath();
const SKIP = HELPER ? nsSandboxUnavailable() : "native/nsexec is not built (no C compiler): run npm run build";
if (SKIP) console.warn(`[ns-spawn tests] SKIPPING: ${SKIP}`);

const NAMESPACES = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];

let sandbox: NsSandbox;
let dir: string;
let db: Db;
let manager: ProcessManager;
let target: NamespaceTarget;

beforeAll(async () => {
  if (!SKIP) sandbox = await startNsSandbox("sbx-ns-test");
});
afterAll(async () => {
  await sandbox?.stop();
});

function makeManager(env: Record<string, string> = {}): ProcessManager {
  return new ProcessManager({
    db,
    paths: new SandboxPaths(sandbox.root),
    clock: systemClock,
    logger: silentLogger(),
    logDir: join(dir, "logs"),
    logMaxBytes: 64 * 1024,
    stopGraceMs: 1_000,
    maxFinished: 100,
    restartDelayMs: 10,
    baseEnv: { PATH: "/usr/bin:/bin", HOME: "/root", ...env },
    spawner: namespaceSpawner(() => target),
  });
}

async function run(command: string, extra: { workingDir?: string } = {}): Promise<{ status: string; exitCode: number | null; stdout: string; pid: string }> {
  const started = await manager.start({ command, ...extra });
  const ended = await manager.waitForExit(started.pid);
  const { stdout } = await manager.logs(started.pid);
  return { status: ended.status, exitCode: ended.exitCode, stdout, pid: started.pid };
}

describe.skipIf(SKIP !== "")(`commands entered into a sandbox's namespaces${SKIP ? ` [SKIPPED: ${SKIP}]` : ""}`, () => {
  beforeEach(() => {
    dir = tempDir("ns-spawn-");
    db = openDatabase(join(dir, "agent.db"));
    migrate(db, PROCESS_MIGRATIONS);
    target = { pid: sandbox.pid };
    manager = makeManager();
  });
  afterEach(() => {
    manager.close();
    db.close();
  });

  it("runs in every namespace of the sandbox's PID 1, not the host's", async () => {
    const out = await run(NAMESPACES.map((ns) => `readlink /proc/self/ns/${ns}`).join("; "));
    expect(out.status).toBe("completed");
    const theirs = NAMESPACES.map((ns) => readlinkSync(`/proc/${sandbox.pid}/ns/${ns}`));
    expect(out.stdout.trim().split("\n")).toEqual(theirs);
    for (const ns of ["mnt", "pid", "net", "user"]) expect(readlinkSync(`/proc/${sandbox.pid}/ns/${ns}`)).not.toBe(readlinkSync(`/proc/self/ns/${ns}`));
  });

  it("sees the sandbox's root, hostname and uid map, and writes into the sandbox's files", async () => {
    writeFileSync(join(sandbox.root, "work", "marker"), "mine");
    const out = await run("cat /work/marker; echo; hostname; cat /proc/self/uid_map; test -e /etc/hostname && echo host-etc; pwd; echo made > made", {
      workingDir: "/work",
    });
    const [marker, hostname, uidMap, ...rest] = out.stdout.trim().split("\n");
    expect(marker).toBe("mine");
    expect(hostname).toBe("sbx-ns-test");
    expect(uidMap!.trim().split(/\s+/)).toEqual(readFileSync(`/proc/${sandbox.pid}/uid_map`, "utf8").trim().split(/\s+/));
    expect(rest).toEqual(["/work"]);
    expect(readFileSync(join(sandbox.root, "work", "made"), "utf8")).toBe("made\n");
  });

  it("is known by its pid inside the sandbox, and by its host pid's group outside", async () => {
    const started = await manager.start({ command: "echo $$; exec sleep 1000" });
    const run = manager.runOf(Number(started.pid))!;
    expect(run.alive).toBe(true);
    expect(run.runPid).not.toBe(Number(started.pid));
    expect(pidNamespaceOf(run.runPid)).toBe(pidNamespaceOf(sandbox.pid));
    // The host's view of the same process: its innermost pid is the one the API gives.
    const nsPids = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${run.runPid}/status`, "utf8"))![1]!.split(/\s+/);
    expect(nsPids.at(-1)).toBe(started.pid);
    await until(async () => (await manager.logs(started.pid)).stdout.trim() === started.pid, "the command's own $$");
    await manager.kill(started.pid);
    expect(isAlive(run.runPid)).toBe(false);
  });

  it("kills the whole tree a command started, by its host process group", async () => {
    const started = await manager.start({ command: "sleep 1001 & sleep 1002 & wait" });
    const run = manager.runOf(Number(started.pid))!;
    const ns = pidNamespaceOf(sandbox.pid)!;
    const sleepers = () => pidsInNamespace(ns).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("sleep\u0000100"));
    await until(() => sleepers().length === 2, "both background sleeps");
    const pids = sleepers();
    await manager.kill(started.pid);
    await until(() => !groupAlive(run.runPid) && pids.every((pid) => !isAlive(pid)), "the group gone");
    expect((await manager.waitForExit(started.pid)).status).toBe("killed");
  });

  it("passes stdin, exit codes and signals through the helper", async () => {
    const cat = await manager.start({ command: "cat", stdin: true });
    await manager.writeStdin(cat.pid, Buffer.from("through the sandbox\n"));
    manager.closeStdin(cat.pid);
    expect((await manager.waitForExit(cat.pid)).status).toBe("completed");
    expect((await manager.logs(cat.pid)).stdout).toBe("through the sandbox\n");

    expect(await run("exit 3")).toMatchObject({ status: "failed", exitCode: 3 });
    const killed = await manager.start({ command: "kill -TERM $$" });
    expect(await manager.waitForExit(killed.pid)).toMatchObject({ status: "failed", exitCode: null, error: "terminated by signal SIGTERM" });
  });

  it("restarts a failed command in the sandbox again, under the same pid", async () => {
    const started = await manager.start({ command: "readlink /proc/self/ns/pid; exit 1", restartOnFailure: true, maxRestarts: 2 });
    const ended = await manager.waitForExit(started.pid);
    expect(ended).toMatchObject({ status: "failed", restartCount: 2, pid: started.pid });
    const lines = (await manager.logs(started.pid)).stdout.split("\n").filter((l) => l.startsWith("pid:"));
    expect(lines).toEqual(Array(3).fill(readlinkSync(`/proc/${sandbox.pid}/ns/pid`)));
  });

  it("waits for a port served in the sandbox's network, which the host's does not have", async () => {
    const server = `exec node -e "require('net').createServer().listen(3917, '0.0.0.0')"`;
    const started = await execute(manager, systemClock, { command: server }, { timeout: 30, waitForPorts: [3917] });
    const run = manager.runOf(Number(started.pid))!;
    expect(readFileSync(`/proc/${run.runPid}/net/tcp`, "utf8")).toContain(":0F4D ");
    expect(readFileSync("/proc/self/net/tcp", "utf8")).not.toContain(":0F4D ");
    expect((await portsOfTree(run.runPid)).map((p) => [p.localPort, p.state])).toEqual([[3917, "LISTEN"]]);
    await manager.kill(started.pid);
  });

  it("keeps only the capabilities it is given, none inheritable or ambient", async () => {
    target = { pid: sandbox.pid, capabilities: ["chown", "kill", "net_bind_service"] };
    const out = await run("grep -E '^Cap(Inh|Bnd|Amb)' /proc/self/status");
    const caps = Object.fromEntries(
      out.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(/:\s+/) as [string, string]),
    );
    expect(BigInt(`0x${caps.CapBnd}`)).toBe(BigInt(capabilityMask(["chown", "kill", "net_bind_service"])));
    expect(BigInt(`0x${caps.CapInh}`)).toBe(0n);
    expect(BigInt(`0x${caps.CapAmb}`)).toBe(0n);
  });

  it("fails the start with the reason when the sandbox cannot take the command", async () => {
    target = { pid: sandbox.pid, user: { uid: 4242, gid: 4242 } };
    // bwrap maps one id: 4242 is no user of this sandbox.
    await expect(manager.start({ command: "true" })).rejects.toMatchObject({ status: 422, message: expect.stringContaining("gid: Invalid argument") });
    target = { pid: sandbox.pid, cgroupProcs: join(dir, "no-such-cgroup", "cgroup.procs") };
    await expect(manager.start({ command: "true" })).rejects.toMatchObject({ status: 422, message: expect.stringContaining("cgroup: No such file") });
    target = { pid: sandbox.pid };
    // The shell is the agent's own SHELL (the reference daemon's rule), here one the sandbox lacks.
    const noShell = makeManager({ SHELL: "/no/shell" });
    try {
      await expect(noShell.start({ command: "true" })).rejects.toMatchObject({ status: 422, message: expect.stringContaining("No such file") });
      expect(noShell.list()).toEqual([]);
    } finally {
      noShell.close();
    }
    expect(manager.list()).toEqual([]);
  });

  it("refuses a working directory missing inside the sandbox, and a sandbox that is gone", async () => {
    const spawner = namespaceSpawner(() => target, HELPER);
    const files = new LogFiles(join(dir, "logs"), "direct");
    const spec = { command: "true", cwd: "/", workingDir: "/nowhere", env: { PATH: "/usr/bin" }, shell: { file: "sh", args: ["-c"] }, stdin: false };
    await expect(spawner(spec, files)).rejects.toEqual(new NamespaceEntryError("cwd", 2, "No such file or directory"));
    const other = await startNsSandbox("gone");
    await other.stop();
    await until(() => !existsSync(`/proc/${other.pid}`), "the other sandbox's PID 1 gone");
    target = { pid: other.pid };
    await expect(spawner({ ...spec, workingDir: "/" }, files)).rejects.toMatchObject({ stage: "user", errno: 3 });
  });
});
