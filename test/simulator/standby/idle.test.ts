import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ConfigError, parseSimConfig } from "../../../simulator/config.js";
import { StandbyController, type FreezableAgent } from "../../../simulator/standby/controller.js";
import { IdleTracker, runningKeepAlive, scheduleWakeAt, SCHEDULE_WAKE_LEAD_MS } from "../../../simulator/standby/idle.js";

/** The standby rules on a fake clock: what is idle, what holds a sandbox awake, when a sleeping one wakes. */

function fakeClock(start = 1_000_000) {
  const clock = { now: start, advance: (ms: number) => void (clock.now += ms) };
  return clock;
}

/** A sandbox whose freeze and thaw are recorded; its agent reports `processes` and `schedules`. */
function fakeSandbox() {
  const calls: string[] = [];
  const agent: FreezableAgent = { canFreeze: true, freeze: async () => void calls.push("freeze"), thaw: async () => void calls.push("thaw") };
  const reply = { processes: [] as { status: string; keepAlive: boolean }[], schedules: [] as { nextRunAt: string | null }[], fail: false };
  const agentJson = async (_key: string, path: string): Promise<unknown> => {
    if (reply.fail) throw new Error("agent busy");
    return path.startsWith("/process") ? reply.processes : { data: reply.schedules, meta: { hasMore: false, nextCursor: "" } };
  };
  return { calls, agent, reply, agentJson };
}

describe("--standby-after", () => {
  it("defaults to 15 s, takes durations and 0 (never)", () => {
    expect((parseSimConfig([], {}) as { standbyAfterMs: number }).standbyAfterMs).toBe(15_000);
    expect((parseSimConfig(["--standby-after", "0"], {}) as { standbyAfterMs: number }).standbyAfterMs).toBe(0);
    expect((parseSimConfig(["--standby-after", "2m"], {}) as { standbyAfterMs: number }).standbyAfterMs).toBe(120_000);
    expect((parseSimConfig(["--standby-after", "500ms"], {}) as { standbyAfterMs: number }).standbyAfterMs).toBe(500);
    expect((parseSimConfig([], { SANDBOX_SIM_STANDBY_AFTER: "30s" }) as { standbyAfterMs: number }).standbyAfterMs).toBe(30_000);
  });

  it("refuses garbage and negative values naming the flag", () => {
    for (const bad of ["soon", "=-5s", "=-1", "15", "1.5x", ""]) {
      const argv = bad.startsWith("=") ? [`--standby-after${bad}`] : ["--standby-after", bad];
      expect(() => parseSimConfig(argv, {}), bad).toThrow(ConfigError);
      expect(() => parseSimConfig(argv, {}), bad).toThrow(/--standby-after|standby-after/);
    }
  });

  it("a bad value is a clear start error of sandbox-sim (exit status, message, no listener)", () => {
    const ran = spawnSync(process.execPath, ["dist/simulator/main.js", "--standby-after=-5s", "--port", "0"], { encoding: "utf8", timeout: 20_000 });
    expect(ran.status).not.toBe(0);
    expect(ran.stderr).toMatch(/--standby-after: invalid duration "-5s"/);
    expect(ran.stdout).not.toMatch(/listening/i);
  });
});

describe("IdleTracker (fake clock)", () => {
  it("a sandbox idle for the period is due; a request starts its idle time again", () => {
    const clock = fakeClock();
    const idle = new IdleTracker(15_000, () => clock.now);
    idle.add("ws/a");
    clock.advance(14_999);
    expect(idle.dueForStandby()).toEqual([]);
    idle.touch("ws/a");
    clock.advance(14_999);
    expect(idle.dueForStandby()).toEqual([]);
    clock.advance(1);
    expect(idle.dueForStandby()).toEqual(["ws/a"]);
  });

  it("an open connection holds it awake however long; its idle time counts from the close", () => {
    const clock = fakeClock();
    const idle = new IdleTracker(1_000, () => clock.now);
    idle.add("ws/a");
    const release = idle.open("ws/a");
    clock.advance(60_000);
    expect(idle.dueForStandby()).toEqual([]);
    release();
    release(); // once only
    expect(idle.openConnections("ws/a")).toBe(0);
    clock.advance(999);
    expect(idle.dueForStandby()).toEqual([]);
    clock.advance(1);
    expect(idle.dueForStandby()).toEqual(["ws/a"]);
  });

  it("0 is never; a sleeping sandbox is not due again; it is due to wake at its schedule's time", () => {
    const clock = fakeClock();
    const never = new IdleTracker(0, () => clock.now);
    never.add("ws/a");
    clock.advance(86_400_000);
    expect(never.dueForStandby()).toEqual([]);

    const idle = new IdleTracker(1_000, () => clock.now);
    idle.add("ws/a");
    clock.advance(1_000);
    idle.setState("ws/a", "STANDBY", clock.now + 60_000);
    expect(idle.dueForStandby()).toEqual([]);
    clock.advance(59_999);
    expect(idle.dueForWake()).toEqual([]);
    clock.advance(1);
    expect(idle.dueForWake()).toEqual(["ws/a"]);
  });

  it("the next schedule's wake time: the earliest nextRunAt, a little ahead; none without schedules", () => {
    expect(scheduleWakeAt([])).toBeUndefined();
    expect(scheduleWakeAt([null, undefined])).toBeUndefined();
    expect(scheduleWakeAt(["2030-01-01T00:01:00Z", "2030-01-01T00:00:30Z", null])).toBe(Date.parse("2030-01-01T00:00:30Z") - SCHEDULE_WAKE_LEAD_MS);
  });

  it("counts running keepAlive processes only (the reference daemon's scale-to-zero counter)", () => {
    expect(
      runningKeepAlive([
        { status: "running", keepAlive: true },
        { status: "completed", keepAlive: true },
        { status: "running", keepAlive: false },
        { status: "killed", keepAlive: true },
      ]),
    ).toBe(1);
  });
});

describe("StandbyController (fake clock, recorded freeze/thaw)", () => {
  it("sleeps an idle sandbox, wakes it on use, and a running keepAlive process holds it awake until it ends", async () => {
    const clock = fakeClock();
    const sb = fakeSandbox();
    const changes: string[] = [];
    const standby = new StandbyController({
      afterMs: 1_000,
      now: () => clock.now,
      tickMs: 0,
      agent: () => sb.agent,
      agentJson: sb.agentJson,
      onChange: (_k, state) => void changes.push(state),
    });
    standby.add("ws/a");
    sb.reply.processes = [{ status: "running", keepAlive: true }];
    clock.advance(1_000);
    await standby.tick();
    expect(standby.state("ws/a")).toBe("RUNNING");
    expect(sb.calls).toEqual([]);
    clock.advance(1_000);
    sb.reply.processes = [{ status: "completed", keepAlive: true }];
    await standby.tick();
    expect(standby.state("ws/a")).toBe("STANDBY");
    expect(sb.calls).toEqual(["freeze"]);
    await standby.wake("ws/a");
    expect(standby.state("ws/a")).toBe("RUNNING");
    expect(sb.calls).toEqual(["freeze", "thaw"]);
    expect(changes).toEqual(["STANDBY", "RUNNING"]);
    await standby.tick(); // just used: not due
    expect(sb.calls).toEqual(["freeze", "thaw"]);
  });

  it("wakes a sleeping sandbox just before its schedule is due, then lets it sleep again", async () => {
    const clock = fakeClock(Date.parse("2030-01-01T00:00:00Z"));
    const sb = fakeSandbox();
    const standby = new StandbyController({ afterMs: 1_000, now: () => clock.now, tickMs: 0, agent: () => sb.agent, agentJson: sb.agentJson });
    standby.add("ws/a");
    sb.reply.schedules = [{ nextRunAt: "2030-01-01T00:01:00Z" }, { nextRunAt: null }];
    clock.advance(1_000);
    await standby.tick();
    expect(standby.state("ws/a")).toBe("STANDBY");
    clock.advance(60_000 - 1_000 - SCHEDULE_WAKE_LEAD_MS - 1);
    await standby.tick();
    expect(standby.state("ws/a")).toBe("STANDBY");
    clock.advance(1);
    await standby.tick();
    expect(standby.state("ws/a")).toBe("RUNNING");
    // The run done, the next one a minute later: idle again, asleep again.
    sb.reply.schedules = [{ nextRunAt: "2030-01-01T00:02:00Z" }];
    clock.advance(1_000);
    await standby.tick();
    expect(standby.state("ws/a")).toBe("STANDBY");
    expect(sb.calls).toEqual(["freeze", "thaw", "freeze"]);
  });

  it("stays awake when a schedule is due within the wake lead (it would only wake again at once)", async () => {
    const clock = fakeClock(Date.parse("2030-01-01T00:00:00Z"));
    const sb = fakeSandbox();
    const standby = new StandbyController({ afterMs: 500, now: () => clock.now, tickMs: 0, agent: () => sb.agent, agentJson: sb.agentJson });
    standby.add("ws/a");
    sb.reply.schedules = [{ nextRunAt: new Date(clock.now + 500 + SCHEDULE_WAKE_LEAD_MS / 2).toISOString() }];
    clock.advance(500);
    await standby.tick();
    expect(standby.state("ws/a")).toBe("RUNNING");
    expect(sb.calls).toEqual([]);
  });

  it("a request during the keepAlive check keeps it awake; an agent that cannot answer is left awake", async () => {
    const clock = fakeClock();
    const sb = fakeSandbox();
    const standby = new StandbyController({
      afterMs: 1_000,
      now: () => clock.now,
      tickMs: 0,
      agent: () => sb.agent,
      agentJson: async (k, path) => {
        clock.advance(10);
        standby.touch(k); // a request arrives while the agent is asked
        return sb.agentJson(k, path);
      },
    });
    standby.add("ws/a");
    clock.advance(1_000);
    expect(await standby.sleep("ws/a")).toBe(false);
    expect(sb.calls).toEqual([]);

    const failing = fakeSandbox();
    failing.reply.fail = true;
    const other = new StandbyController({ afterMs: 1_000, now: () => clock.now, tickMs: 0, agent: () => failing.agent, agentJson: failing.agentJson });
    other.add("ws/b");
    clock.advance(1_000);
    expect(await other.sleep("ws/b")).toBe(false);
    expect(other.state("ws/b")).toBe("RUNNING");
    expect(failing.calls).toEqual([]);
  });

  it("forced, it sleeps whatever holds it awake; a wake during the freeze resumes it once frozen", async () => {
    const clock = fakeClock();
    const sb = fakeSandbox();
    sb.reply.processes = [{ status: "running", keepAlive: true }];
    const standby = new StandbyController({ afterMs: 0, now: () => clock.now, tickMs: 0, agent: () => sb.agent, agentJson: sb.agentJson });
    standby.add("ws/a");
    standby.open("ws/a");
    const sleeping = standby.sleep("ws/a", true);
    const waking = standby.wake("ws/a");
    expect(await sleeping).toBe(true);
    await waking;
    expect(sb.calls).toEqual(["freeze", "thaw"]);
    expect(standby.state("ws/a")).toBe("RUNNING");
  });

  it("a launcher that cannot stop a sandbox in place never sleeps it", async () => {
    const clock = fakeClock();
    const standby = new StandbyController({
      afterMs: 1_000,
      now: () => clock.now,
      tickMs: 0,
      agent: () => ({ canFreeze: false, freeze: async () => {}, thaw: async () => {} }),
      agentJson: async () => [],
    });
    standby.add("ws/a");
    clock.advance(5_000);
    expect(await standby.sleep("ws/a", true)).toBe(false);
    expect(standby.state("ws/a")).toBe("RUNNING");
  });
});
