import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { sequentialIds } from "../../../src/ids.js";
import { REDACT_PATHS, silentLogger, type Logger } from "../../../src/logging.js";
import { migrate, openDatabase, type Db } from "../../../src/sqlite.js";
import { ScheduleBodySchema } from "../../../sandbox-agent/schedules/definition.js";
import { FIRE_RETRY_MS, HEARTBEAT_MS } from "../../../sandbox-agent/schedules/scheduler.js";
import { createSchedules, SCHEDULE_MIGRATIONS, type Schedules } from "../../../sandbox-agent/schedules/schedules.js";
import { RETIRED_KEPT } from "../../../sandbox-agent/schedules/schedule-store.js";
import { FakeRunner, settle } from "./fake-runner.js";

const MIN = 60_000;
let dir: string;
let clock: FakeClock;
let runner: FakeRunner;
let open: { db: Db; s: Schedules }[] = [];

function boot(logger: Logger = silentLogger()): Schedules {
  const db = openDatabase(join(dir, "agent.db"));
  migrate(db, SCHEDULE_MIGRATIONS);
  const s = createSchedules({
    db,
    runner,
    clock,
    ids: sequentialIds(`s${open.length}`),
    executionIds: sequentialIds(`e${open.length}`),
    logger,
    sandbox: "sbx",
  });
  s.scheduler.start();
  open.push({ db, s });
  return s;
}

function shutdown(s: Schedules): void {
  const entry = open.find((o) => o.s === s)!;
  s.scheduler.stop();
  entry.db.close();
  open = open.filter((o) => o !== entry);
}

const def = (body: Record<string, unknown>) => ScheduleBodySchema.parse({ input: { command: "echo hi" }, ...body });
const executions = (s: Schedules, scheduleId?: string) => s.service.executions({ scheduleId }, { sort: "asc", limit: 1000 }).rows;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "schedules-"));
  clock = new FakeClock("2026-01-01T00:00:00Z");
  runner = new FakeRunner();
});

afterEach(() => {
  for (const o of open) {
    o.s.scheduler.stop();
    o.db.close();
  }
  open = [];
  rmSync(dir, { recursive: true, force: true });
});

describe("firing", () => {
  it("fires a cron at its due time, not before, with one armed timer for all schedules", async () => {
    const s = boot();
    for (let i = 0; i < 50; i++) s.service.create(def({ id: `c${i}`, type: "cron", value: `${i} * * * *` }));
    s.service.create(def({ id: "five", type: "cron", value: "*/5 * * * *" }));
    expect(clock.pendingTimers).toBe(1);
    clock.advance(4 * MIN + 59_999);
    await settle();
    expect(executions(s, "five")).toHaveLength(0);
    clock.advance(1);
    await settle();
    const [first] = executions(s, "five");
    expect(first).toMatchObject({ status: "running", trigger: "schedule", due_at: Date.parse("2026-01-01T00:05:00Z"), status_code: 200, sandbox: "sbx" });
    expect(clock.pendingTimers).toBe(1);
    runner.end(first!.process_name!, { output: "hi\n" });
    await settle();
    expect(executions(s, "five")[0]).toMatchObject({ status: "succeeded", exit_code: 0, error: "", output: "hi\n" });
    expect(s.service.get("five").next_due_at).toBe(Date.parse("2026-01-01T00:10:00Z"));
  });

  it("fires an `at` once, then deletes it (the platform's rule) and keeps its executions; its id can be reused", async () => {
    const s = boot();
    s.service.create(def({ id: "once", type: "sleep", value: "90s" }));
    s.service.create(def({ id: "later", type: "cron", value: "0 0 1 1 *" }));
    clock.advance(10 * MIN);
    await settle();
    expect(executions(s, "once")).toMatchObject([{ schedule_id: "once", due_at: Date.parse("2026-01-01T00:01:30Z") }]);
    expect(() => s.service.get("once")).toThrow(/not found/);
    expect(() => s.service.delete("once")).toThrow(/not found/);
    expect(s.service.list({}, { sort: "asc", limit: 100 })).toMatchObject({ rows: [{ id: "later" }], total: 1 });
    expect(s.service.list({ type: "at" }, { sort: "asc", limit: 100 }).total).toBe(0);
    expect(s.service.withHistory("once")).toBe("once");
    expect(clock.pendingTimers).toBe(1); // the cron's
    runner.end(executions(s, "once")[0]!.process_name!, { output: "hi\n" });
    await settle();
    expect(executions(s, "once")[0]).toMatchObject({ status: "succeeded", output: "hi\n" }); // the run's end is still recorded
    // A new schedule of that id starts afresh: the retired one and its history go.
    s.service.create(def({ id: "once", type: "cron", value: "0 0 1 1 *" }));
    expect(executions(s, "once")).toHaveLength(0);
    expect(s.service.get("once").type).toBe("cron");
  });

  it("keeps the history of the newest fired one-offs only (RETIRED_KEPT)", async () => {
    const s = boot();
    for (let i = 0; i < RETIRED_KEPT + 5; i++) s.service.create(def({ id: `at${i}`, type: "sleep", value: `${60 + i}s` }));
    clock.advance(RETIRED_KEPT * 1000 + 10 * MIN);
    await settle();
    expect(executions(s).length).toBe(RETIRED_KEPT);
    expect(() => s.service.withHistory("at0")).toThrow(/not found/);
    expect(s.service.withHistory(`at${RETIRED_KEPT + 4}`)).toBe(`at${RETIRED_KEPT + 4}`);
  });

  it("records how a run ended: non-zero exit, timeout kill, failure to start", async () => {
    const s = boot();
    s.service.create(def({ id: "a", type: "sleep", value: "1m", input: { command: "exit 3" } }));
    s.service.create(def({ id: "b", type: "sleep", value: "1m", input: { command: "sleep 9", timeout: 5 } }));
    clock.advance(MIN);
    await settle();
    runner.end(executions(s, "a")[0]!.process_name!, { exitCode: 3 });
    runner.end(executions(s, "b")[0]!.process_name!, { status: "killed", exitCode: null });
    await settle();
    expect(executions(s, "a")[0]).toMatchObject({ status: "failed", exit_code: 3, error: "non-zero exit code 3" });
    expect(executions(s, "b")[0]).toMatchObject({ status: "failed", error: "timeout: killed after 5s" });

    runner.failStart = Object.assign(new Error("workingDir: no such directory"), { status: 422 });
    s.service.create(def({ id: "c", type: "sleep", value: "1m" }));
    clock.advance(MIN);
    await settle();
    expect(executions(s, "c")[0]).toMatchObject({ status: "failed", status_code: 422, error: "could not start the process: workingDir: no such directory" });
  });

  it("passes the input to the runner with the SDK's defaults (keepAlive true, timeout 600)", async () => {
    const s = boot();
    s.service.create(def({ id: "d", type: "sleep", value: "1m", input: { command: "env", env: { A: "1" }, name: "job", workingDir: "/tmp" } }));
    clock.advance(MIN);
    await settle();
    expect(runner.started[0]).toEqual({ command: "env", env: { A: "1" }, name: "job-e0-1", workingDir: "/tmp", keepAlive: true, timeout: 600, killAfter: 600 });
  });
});

describe("catch-up after downtime and clock jumps", () => {
  it("fires a missed `at` once and a cron that missed many runs once, then resumes its cadence", async () => {
    let s = boot();
    s.service.create(def({ id: "at", type: "at", value: "2026-01-01T01:00:00Z" }));
    s.service.create(def({ id: "cron", type: "cron", value: "*/5 * * * *" }));
    shutdown(s);
    clock.advance(3 * 60 * MIN + 2 * MIN); // down for 3 h 2 min: 36 cron runs missed
    s = boot();
    await settle();
    expect(executions(s, "at").map((e) => e.trigger)).toEqual(["catch-up"]);
    expect(executions(s, "cron").map((e) => e.trigger)).toEqual(["catch-up"]);
    expect(s.service.get("cron").next_due_at).toBe(Date.parse("2026-01-01T03:05:00Z"));
    runner.end(executions(s, "cron")[0]!.process_name!);
    clock.advance(3 * MIN);
    await settle();
    expect(executions(s, "cron").map((e) => e.trigger)).toEqual(["catch-up", "schedule"]);
    expect(executions(s, "at")).toHaveLength(1);
  });

  it('marks executions left running by a dead agent as failed "agent restarted", once', async () => {
    let s = boot();
    s.service.create(def({ id: "x", type: "sleep", value: "1m" }));
    clock.advance(MIN);
    await settle();
    expect(executions(s, "x")[0]!.status).toBe("running");
    shutdown(s);
    s = boot();
    expect(executions(s, "x")).toMatchObject([{ status: "failed", error: "agent restarted" }]);
    // the old process reporting later does not overwrite it
    runner.end(executions(s, "x")[0]!.process_name!);
    await settle();
    expect(executions(s, "x")).toMatchObject([{ status: "failed", error: "agent restarted" }]);
  });

  it("coalesces the runs skipped by a forward wall-clock jump into one", async () => {
    const s = boot();
    s.service.create(def({ id: "m", type: "cron", value: "* * * * *", concurrencyPolicy: "Allow" }));
    clock.set(clock.now() + 2 * 60 * MIN); // NTP step: 2 h later, timers not yet due on the old clock
    clock.advance(HEARTBEAT_MS);
    await settle();
    expect(executions(s, "m")).toHaveLength(1);
  });

  it("keeps every timer under the heartbeat for an `at` months away, and fires it once", async () => {
    const s = boot();
    s.service.create(def({ id: "far", type: "at", value: "2026-02-20T00:00:00Z" })); // 50 days: past setTimeout's 24.8-day limit
    const spy: number[] = [];
    const setTimer = clock.setTimer.bind(clock);
    clock.setTimer = (ms, fn) => (spy.push(ms), setTimer(ms, fn));
    s.service.create(def({ id: "near", type: "sleep", value: "1m" }));
    clock.advance(50 * 24 * 60 * MIN - 1);
    await settle();
    expect(executions(s, "far")).toHaveLength(0);
    clock.advance(1);
    await settle();
    expect(executions(s, "far")).toHaveLength(1);
    expect(spy.length).toBeGreaterThan(1000);
    expect(spy.reduce((a, b) => Math.max(a, b), 0)).toBeLessThanOrEqual(HEARTBEAT_MS);
  });
});

describe("failures", () => {
  it("retries a firing whose transaction failed, recording nothing twice and nothing half", async () => {
    const s = boot();
    s.service.create(def({ id: "w", type: "cron", value: "*/5 * * * *" }));
    const record = s.store.recordExecution.bind(s.store);
    let failures = 1;
    s.store.recordExecution = (e, max) => {
      if (failures-- > 0) throw new Error("SQLITE_FULL: database or disk is full");
      return record(e, max);
    };
    clock.advance(5 * MIN);
    await settle();
    expect(executions(s, "w")).toHaveLength(0);
    expect(s.service.get("w").next_due_at).toBe(Date.parse("2026-01-01T00:05:00Z")); // rolled back
    expect(runner.started).toHaveLength(0);
    clock.advance(FIRE_RETRY_MS);
    await settle();
    expect(executions(s, "w")).toMatchObject([{ due_at: Date.parse("2026-01-01T00:05:00Z"), status: "running" }]);
    expect(runner.started).toHaveLength(1);
    expect(s.service.get("w").next_due_at).toBe(Date.parse("2026-01-01T00:10:00Z"));
  });
});

describe("retention", () => {
  it("keeps at most maxExecutions records, deleting the oldest in the same transaction", async () => {
    const s = boot();
    s.service.create(def({ id: "r", type: "cron", value: "* * * * *", maxExecutions: 3, concurrencyPolicy: "Allow" }));
    for (let i = 0; i < 5; i++) clock.advance(MIN);
    await settle();
    const kept = executions(s, "r");
    expect(kept.map((e) => e.due_at)).toEqual([3, 4, 5].map((m) => Date.parse(`2026-01-01T00:0${m}:00Z`)));
  });

  it("never exceeds the limit when two schedules record interleaved, and trims on PUT", () => {
    const s = boot();
    s.service.create(def({ id: "p", type: "cron", value: "0 0 * * *", maxExecutions: 2 }));
    s.service.create(def({ id: "q", type: "cron", value: "0 0 * * *", maxExecutions: 4 }));
    const base = {
      sandbox: "sbx",
      trigger: "manual" as const,
      due_at: null,
      created_at: 0,
      executed_at: 0,
      completed_at: 0,
      status: "succeeded" as const,
      status_code: 200,
      exit_code: 0,
      process_name: "x",
      timeout: 0,
      error: "",
      output: "",
    };
    for (let i = 0; i < 20; i++) {
      s.store.recordExecution({ ...base, id: `p${i}`, schedule_id: "p" }, 2);
      s.store.recordExecution({ ...base, id: `q${i}`, schedule_id: "q" }, 4);
      expect(executions(s, "p").length).toBeLessThanOrEqual(2);
      expect(executions(s, "q").length).toBeLessThanOrEqual(4);
    }
    expect(executions(s, "p").map((e) => e.id)).toEqual(["p18", "p19"]);
    s.service.replace("q", def({ type: "cron", value: "0 0 * * *", maxExecutions: 1 }));
    expect(executions(s, "q").map((e) => e.id)).toEqual(["q19"]);
  });
});

describe("overlap (concurrencyPolicy)", () => {
  it("Forbid (default) records a skipped run with error overlap while the previous one runs", async () => {
    const s = boot();
    s.service.create(def({ id: "f", type: "cron", value: "* * * * *" }));
    clock.advance(MIN);
    clock.advance(MIN);
    await settle();
    expect(executions(s, "f")).toMatchObject([{ status: "running" }, { status: "skipped", process_name: null }]);
    expect(executions(s, "f")[1]!.error).toMatch(/^overlap/);
    expect(runner.started).toHaveLength(1);
    await expect(s.service.runNow("f")).rejects.toMatchObject({ status: 409 });
  });

  it("Allow runs both", async () => {
    const s = boot();
    s.service.create(def({ id: "a", type: "cron", value: "* * * * *", concurrencyPolicy: "Allow" }));
    clock.advance(MIN);
    clock.advance(MIN);
    await settle();
    expect(executions(s, "a").map((e) => e.status)).toEqual(["running", "running"]);
    expect(runner.running).toHaveLength(2);
  });

  it("Replace kills the running one and starts the new", async () => {
    const s = boot();
    s.service.create(def({ id: "r", type: "cron", value: "* * * * *", concurrencyPolicy: "Replace" }));
    clock.advance(MIN);
    await settle();
    const first = executions(s, "r")[0]!;
    clock.advance(MIN);
    await settle();
    expect(runner.killed).toEqual([first.process_name]);
    expect(executions(s, "r")).toMatchObject([{ status: "failed", error: expect.stringMatching(/^replaced/) }, { status: "running" }]);
  });

  it("run now starts an execution immediately and returns it", async () => {
    const s = boot();
    s.service.create(def({ id: "n", type: "cron", value: "0 0 1 1 *" }));
    const run = await s.service.runNow("n");
    expect(run).toMatchObject({ schedule_id: "n", trigger: "manual", status: "running", status_code: 200, due_at: null });
    expect(runner.running).toEqual([run.process_name]);
  });
});

describe("logging", () => {
  it("never writes input.env values to the log", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = pino({ level: "trace", redact: { paths: REDACT_PATHS, censor: "***" } }, sink);
    const s = boot(logger);
    s.service.create(def({ id: "sec", type: "sleep", value: "1m", input: { command: "true", env: { TOKEN: "hunter2-secret" } } }));
    clock.advance(MIN);
    await settle();
    runner.end(executions(s, "sec")[0]!.process_name!);
    await settle();
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.join("")).not.toContain("hunter2-secret");
  });
});
