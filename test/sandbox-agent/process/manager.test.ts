import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { ApiError } from "../../../src/errors.js";
import { silentLogger } from "../../../src/logging.js";
import { migrate, openDatabase, type Db } from "../../../src/sqlite.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { ProcessManager } from "../../../sandbox-agent/process/manager.js";
import { groupAlive, isAlive } from "../../../sandbox-agent/process/os.js";
import { PROCESS_MIGRATIONS } from "../../../sandbox-agent/process/process-store.js";
import { tempDir } from "../../helpers/agent.js";

let dir: string;
let db: Db;
let clock: FakeClock;
let manager: ProcessManager;

function makeManager(options: { maxFinished?: number; stopGraceMs?: number; baseEnv?: NodeJS.ProcessEnv } = {}): ProcessManager {
  return new ProcessManager({
    db,
    paths: new SandboxPaths(join(dir, "root")),
    clock,
    logger: silentLogger(),
    logDir: join(dir, "logs"),
    logMaxBytes: 1024,
    stopGraceMs: options.stopGraceMs ?? 1_000,
    maxFinished: options.maxFinished ?? 100,
    baseEnv: options.baseEnv,
  });
}

beforeEach(() => {
  dir = tempDir("process-manager-");
  db = openDatabase(join(dir, "agent.db"));
  migrate(db, PROCESS_MIGRATIONS);
  clock = new FakeClock("2026-03-01T12:00:00Z");
  manager = makeManager();
});
afterEach(() => {
  manager.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function eventually(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}

describe("ProcessManager", () => {
  it("records start and end on the injected clock", async () => {
    const started = await manager.start({ command: "exit 0", name: "clocked" });
    expect(started).toMatchObject({
      status: "running",
      startedAt: "2026-03-01T12:00:00.000Z",
      completedAt: null,
      exitCode: null,
      timeout: 0,
      keepAlive: false,
    });
    const ended = await manager.waitForExit("clocked");
    expect(ended).toMatchObject({ status: "completed", exitCode: 0, error: null, completedAt: "2026-03-01T12:00:00.000Z" });
    expect(await manager.waitForExit(started.pid)).toEqual(ended); // at once when already ended
  });

  it("killAfter kills the whole process group when it expires, status killed", async () => {
    const p = await manager.start({ command: "sleep 30 & echo $!; sleep 30", killAfter: 2 });
    let child = 0;
    for (let i = 0; i < 500 && !child; i++) {
      child = Number((await manager.logs(p.pid)).stdout.trim());
      if (!child) await new Promise((r) => setTimeout(r, 10));
    }
    clock.advance(1_999);
    expect(manager.get(p.pid)!.status).toBe("running");
    clock.advance(1);
    const ended = await manager.waitForExit(p.pid);
    expect(ended).toMatchObject({ status: "killed", error: "timed out after 2 seconds", exitCode: null });
    await eventually(() => !isAlive(child));
  });

  it("commands inherit the agent's environment except its API token; request env wins", async () => {
    manager.close();
    manager = makeManager({ baseEnv: { PATH: process.env.PATH, SANDBOX_AGENT_TOKEN: "secret", KEEP: "agent", OVER: "agent" } });
    const p = await manager.start({ command: 'echo "${SANDBOX_AGENT_TOKEN:-unset} $KEEP $OVER"', env: { OVER: "request" } });
    await manager.waitForExit(p.pid);
    expect((await manager.logs(p.pid)).stdout).toBe("unset agent request\n");
  });

  it.skipIf(!existsSync("/bin/bash"))("runs commands with $SHELL $SHELL_ARGS of the sandbox's environment, sh -c (sh on its PATH) when unset", async () => {
    manager.close();
    manager = makeManager({ baseEnv: { PATH: process.env.PATH, SHELL: "/bin/bash", SHELL_ARGS: "-e -c" } });
    const bash = await manager.start({ command: 'echo "$0 ${BASH_VERSION:+bash} $-"' });
    await manager.waitForExit(bash.pid);
    expect((await manager.logs(bash.pid)).stdout).toMatch(/^\/bin\/bash bash \S*e\S*\n$/);
    manager.close();
    manager = makeManager({ baseEnv: { PATH: process.env.PATH } });
    const sh = await manager.start({ command: 'echo "$0"' });
    await manager.waitForExit(sh.pid);
    expect((await manager.logs(sh.pid)).stdout).toMatch(/^\/(usr\/)?bin\/sh\n$/);
  });

  it("restarts a failed run in place after the delay on the clock: same pid, new run pid, restartCount", async () => {
    const p = await manager.start({ command: "exit 2", restartOnFailure: true, maxRestarts: 1 });
    await eventually(() => clock.pendingTimers > 0);
    expect(manager.get(p.pid)).toMatchObject({ status: "running", restartCount: 1 });
    clock.advance(1_000);
    const ended = await manager.waitForExit(p.pid);
    expect(ended).toMatchObject({ pid: p.pid, status: "failed", exitCode: 2, restartCount: 1 });
  });

  it("kill during the pause before a restart ends it at once: killed, no new run", async () => {
    const p = await manager.start({ command: "exit 2", restartOnFailure: true, maxRestarts: -1 });
    await eventually(() => manager.get(p.pid)!.restartCount === 1);
    await manager.kill(p.pid);
    clock.advance(5_000);
    expect(manager.get(p.pid)).toMatchObject({ status: "killed", error: "killed on request", restartCount: 1 });
    expect(manager.runOf(Number(p.pid))).toMatchObject({ runPid: Number(p.pid), alive: false });
  });

  it("a timeout alone arms no timer: it only bounds an HTTP caller's waits (reference §4.2)", async () => {
    const p = await manager.start({ command: "true", timeout: 5 });
    expect(clock.pendingTimers).toBe(0);
    await manager.waitForExit(p.pid);
  });

  it("stop sends SIGTERM, then SIGKILL once the grace period has passed on the clock", async () => {
    const p = await manager.start({ command: "trap '' TERM; echo ready; while true; do sleep 0.05; done" });
    for (let i = 0; i < 500 && !(await manager.logs(p.pid)).stdout; i++) await new Promise((r) => setTimeout(r, 10));
    const stopping = manager.stop(p.pid);
    await new Promise((r) => setTimeout(r, 100));
    expect(manager.get(p.pid)!.status).toBe("running"); // SIGTERM ignored
    clock.advance(1_000);
    await stopping;
    expect(manager.get(p.pid)).toMatchObject({ status: "stopped", error: "stopped on request" });
  });

  it("keeps capping the files while a background child of an ended command still writes", async () => {
    // sh ends at once; its background job writes 20,000 bytes later, into the same files
    const p = await manager.start({ command: "(sleep 0.3; i=0; while [ $i -lt 2000 ]; do printf 0123456789; i=$((i+1)); done; echo END) &" });
    expect((await manager.waitForExit(p.pid)).status).toBe("completed");
    const onDisk = () => readdirSync(join(dir, "logs")).reduce((n, f) => n + statSync(join(dir, "logs", f)).size, 0);
    for (let i = 0; i < 500 && (groupAlive(Number(p.pid)) || onDisk() > 1024 || onDisk() === 0); i++) await new Promise((r) => setTimeout(r, 10));
    expect(onDisk()).toBeLessThanOrEqual(1024);
    const { stdout } = await manager.logs(p.pid);
    expect(stdout).toMatch(/^\[output truncated: \d+ earlier bytes dropped\]\n/);
    expect(stdout.endsWith("0123456789END\n")).toBe(true);
  });

  it("two concurrent starts with one name: one wins, the other is a 409", async () => {
    const results = await Promise.allSettled([manager.start({ command: "sleep 5", name: "once" }), manager.start({ command: "sleep 5", name: "once" })]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(rejected.reason).toBeInstanceOf(ApiError);
    expect((rejected.reason as ApiError).status).toBe(409);
    await manager.kill("once");
  });

  it("validates requests from code as the API does", async () => {
    await expect(manager.start({ command: "" })).rejects.toMatchObject({ status: 400 });
    await expect(manager.start({ command: "true", timeout: -3 })).rejects.toMatchObject({ status: 400, message: /timeout/ });
    await expect(manager.start({ command: "true", workingDir: "/absent" })).rejects.toMatchObject({ status: 422 });
    await expect(manager.stop("absent")).rejects.toMatchObject({ status: 404 });
  });

  it("keeps only the newest finished processes (history), deleting their output files", async () => {
    manager.close();
    manager = makeManager({ maxFinished: 2 });
    const first = await manager.start({ command: "echo 1", name: "h1" });
    await manager.waitForExit(first.pid);
    for (const name of ["h2", "h3"]) await manager.waitForExit((await manager.start({ command: "echo x", name })).pid);
    expect(manager.get("h1")).toBeUndefined();
    expect(manager.list().map((p) => p.name)).toEqual(["h2", "h3"]);
    expect(readdirSync(join(dir, "logs")).filter((f) => f.endsWith(".log"))).toHaveLength(4);
  });

  it("after close, start is refused with 503 and pending waits are rejected; the process keeps running", async () => {
    const p = await manager.start({ command: "sleep 0.3" });
    const waiting = manager.waitForExit(p.pid);
    manager.close();
    await expect(waiting).rejects.toMatchObject({ status: 503 });
    await expect(manager.start({ command: "true" })).rejects.toMatchObject({ status: 503 });
    expect(isAlive(Number(p.pid))).toBe(true);
  });
});
