import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { silentLogger } from "../../../src/logging.js";
import { migrate, openDatabase, type Db } from "../../../src/sqlite.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { ProcessManager } from "../../../sandbox-agent/process/manager.js";
import { PROCESS_MIGRATIONS } from "../../../sandbox-agent/process/process-store.js";
import { tempDir } from "../../helpers/agent.js";

/**
 * --process-wrapper (every command starts through an argv prefix: the
 * isolating launcher's capability drop) and --memory-events (a SIGKILL while
 * the cgroup's oom_kill counter rose is reported as an OOM kill), with a fake counter.
 */
let dir: string;
let db: Db;
let oomKills = 0;
const managers: ProcessManager[] = [];

function makeManager(wrapper?: string[]): ProcessManager {
  const manager = new ProcessManager({
    db,
    paths: new SandboxPaths(join(dir, "root")),
    clock: new FakeClock("2026-03-01T12:00:00Z"),
    logger: silentLogger(),
    logDir: join(dir, "logs"),
    logMaxBytes: 4096,
    stopGraceMs: 1_000,
    maxFinished: 100,
    wrapper,
    oomKills: () => oomKills,
  });
  managers.push(manager);
  return manager;
}

beforeEach(() => {
  dir = tempDir("process-wrapper-");
  mkdirSync(join(dir, "root"));
  db = openDatabase(join(dir, "agent.db"));
  migrate(db, PROCESS_MIGRATIONS);
  oomKills = 0;
});
afterEach(() => {
  for (const m of managers.splice(0)) m.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("process wrapper and OOM reports", () => {
  it("starts every command through the wrapper", async () => {
    const manager = makeManager(["/usr/bin/env", "WRAPPED=yes"]);
    const started = await manager.start({ command: "echo $WRAPPED" });
    const done = await manager.waitForExit(started.pid);
    expect(done.status).toBe("completed");
    expect((await manager.logs(started.pid)).stdout).toBe("yes\n");
  });

  it("a SIGKILL while the OOM-kill counter rose is an OOM kill; one without is not", async () => {
    const manager = makeManager();
    const oom = await manager.start({ command: "sleep 30" });
    oomKills = 1; // the kernel counted a kill in the sandbox's cgroup
    process.kill(Number(oom.pid), "SIGKILL");
    const oomDone = await manager.waitForExit(oom.pid);
    expect(oomDone.status).toBe("failed");
    expect(oomDone.error).toMatch(/OOM killer/);

    const plain = await manager.start({ command: "sleep 30" });
    process.kill(Number(plain.pid), "SIGKILL");
    const plainDone = await manager.waitForExit(plain.pid);
    expect(plainDone.error).toBe("terminated by signal SIGKILL");
  });
});
