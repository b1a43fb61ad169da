import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { isAlive } from "../../../simulator/launcher/proc.js";
import { stopChild, WarmPool } from "../../../simulator/launcher/warm-pool.js";

// A stand-in warm agent: a real Node process that says it has loaded (one IPC message) and waits, as warm-agent.ts does.
const WARM = "process.send('warm'); process.on('disconnect', () => process.exit(0)); setInterval(() => {}, 1000);";
const SILENT_DEATH = "process.exit(3);";
// A warm agent still loading: it has not said so yet when the pool closes.
const STILL_WARMING = "setInterval(() => {}, 1000);";

const started: ChildProcess[] = [];
function spawnNode(script: string): ChildProcess {
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "ignore", "ignore", "ipc"] });
  started.push(child);
  return child;
}

function poolOf(size: number, script = () => WARM) {
  const exited: ChildProcess[] = [];
  const discarded: ChildProcess[] = [];
  const pool = new WarmPool<ChildProcess, string>({
    size,
    keyOf: (spec) => spec,
    spawn: () => spawnNode(script()),
    child: (child) => child,
    exited: (child) => exited.push(child),
    discard: (child) => discarded.push(child),
    stop: (child) => stopChild(child, "SIGTERM"),
  });
  return { pool, exited, discarded };
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((child) => stopChild(child, "SIGKILL")));
});

describe("the launchers' shared warm pool", () => {
  it("hands each item out once and starts a fresh one in its place: a taken item never comes back", async () => {
    const { pool } = poolOf(1);
    pool.refill("a");
    await pool.warmed();
    const first = await pool.take("a");
    expect(first).toBeDefined();
    expect(pool.state()).toEqual({ size: 1, idle: 0, pids: [] });
    expect(await pool.take("a")).toBeUndefined();
    pool.refill("a");
    const second = await pool.take("a");
    expect(second).toBeDefined();
    expect(second!.pid).not.toBe(first!.pid);
    await pool.close();
  });

  it("keeps size items per key and gives an item only to specs of its key", async () => {
    const { pool } = poolOf(1);
    pool.refill("a");
    pool.refill("b");
    pool.refill("a");
    await pool.warmed();
    const state = pool.state();
    expect(state.idle).toBe(2);
    expect(state.pids.every((pid) => isAlive(pid))).toBe(true);
    expect(await pool.take("c")).toBeUndefined();
    expect(await pool.take("b")).toBeDefined();
    expect(await pool.take("b")).toBeUndefined();
    await pool.close();
  });

  it("skips an item that died before it was ready, and drops it from the pool when it exits", async () => {
    const { pool, exited, discarded } = poolOf(1, () => SILENT_DEATH);
    pool.refill("a");
    const [pid] = pool.state().pids;
    expect(pid).toBeGreaterThan(0);
    expect(await pool.take("a")).toBeUndefined();
    expect(discarded.map((child) => child.pid)).toEqual([pid]);
    expect(exited.map((child) => child.pid)).toEqual([pid]);
    expect(pool.state().idle).toBe(0);
  });

  it("with size 0 starts nothing", async () => {
    const { pool } = poolOf(0);
    pool.refill("a");
    expect(pool.state()).toEqual({ size: 0, idle: 0, pids: [] });
    expect(await pool.take("a")).toBeUndefined();
  });

  it("close stops every idle item (checked by pid) and starts none after", async () => {
    const { pool } = poolOf(2);
    pool.refill("a");
    await pool.warmed();
    const { pids } = pool.state();
    expect(pids).toHaveLength(2);
    await pool.close();
    expect(pids.filter((pid) => isAlive(pid))).toEqual([]);
    pool.refill("a");
    expect(pool.state().idle).toBe(0);
  });
  it("close stops an item a take still waits for (it is not handed out yet): nothing left by pid, and the take gets none", async () => {
    const { pool } = poolOf(1, () => STILL_WARMING);
    pool.refill("a");
    const [pid] = pool.state().pids;
    const taking = pool.take("a");
    expect(pool.state().idle).toBe(0); // out of the pool's idle list, waiting for readiness
    await pool.close();
    expect(isAlive(pid!)).toBe(false);
    expect(await taking).toBeUndefined();
  });

  it("a spawn that throws ends the refill quietly (it runs in a start's finally, where a throw would lose the sandbox)", () => {
    const pool = new WarmPool<ChildProcess, string>({
      size: 1,
      keyOf: (spec) => spec,
      spawn: () => {
        throw new Error("no room for a warm item");
      },
      child: (child) => child,
      discard: () => {},
      stop: (child) => stopChild(child, "SIGTERM"),
    });
    expect(() => pool.refill("a")).not.toThrow();
    expect(pool.state().idle).toBe(0);
  });
});
