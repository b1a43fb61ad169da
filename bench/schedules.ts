/**
 * bench:schedules — the scheduler with 10,000 active cron schedules.
 *
 * 1. Idle CPU and RSS of the real agent (child process) with 10,000 cron
 *    schedules loaded through the HTTP API, beside the same agent with none.
 *    The crons are spread over other days of the month (in four zones) so
 *    none fires during the measurement: what is measured is the cost of
 *    holding them armed. Also: the time to re-arm them all on a restart.
 * 2. Firing lateness, in process (real SQLite file, system clock): 1,000 `at`
 *    schedules due in the same instant, on top of 10,000 crons, from the due
 *    time to the runner's start() call; beside 1,000 bare setTimeouts aimed
 *    at one instant (what Node's timers alone give). The runner only records
 *    the call: spawning 1,000 shells would measure fork(), not the scheduler.
 * 3. Executions recorded per second with rotation (maxExecutions 100, every
 *    insert deletes the oldest in the same transaction), beside plain inserts
 *    into the same table, one transaction each.
 *
 *   BENCH_CRONS (default 10000), BENCH_ATS (1000), BENCH_IDLE_S (15), BENCH_RECORDS (50000),
 *   BENCH_ONLY (records | lateness | idle)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../src/clock.js";
import { uuidIds } from "../src/ids.js";
import { silentLogger } from "../src/logging.js";
import { migrate, openDatabase } from "../src/sqlite.js";
import { ScheduleBodySchema } from "../sandbox-agent/schedules/definition.js";
import type { RunnerProcess, ScheduleRunner } from "../sandbox-agent/schedules/runner.js";
import { createSchedules, SCHEDULE_MIGRATIONS } from "../sandbox-agent/schedules/schedules.js";
import { cpuTimeMs, fmt, peakRssMiB, percentile, startAgentProcess } from "./lib.js";
import { readFileSync } from "node:fs";

const CRONS = Number(process.env.BENCH_CRONS ?? 10_000);
const ATS = Number(process.env.BENCH_ATS ?? 1_000);
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 15);
const RECORDS = Number(process.env.BENCH_RECORDS ?? 50_000);
const ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo"];

const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  return kb / 1024;
}

/** A cron that does not fire in the next few days: a day of the month at least 3 days away. */
function quietCron(i: number): { value: string; timezone: string } {
  const today = new Date().getUTCDate();
  const days = Array.from({ length: 28 }, (_, k) => k + 1).filter((d) => Math.abs(d - today) > 2 && Math.abs(d - today) < 26);
  return { value: `${i % 60} ${Math.floor(i / 60) % 24} ${days[i % days.length]} * *`, timezone: ZONES[i % ZONES.length]! };
}

function post(url: string, body: unknown, agent: Agent): Promise<void> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", agent, headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) } }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`POST ${url}: ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(data);
  });
}

async function idleCpu(pid: number, seconds: number): Promise<number> {
  const cpu0 = cpuTimeMs(pid);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  return ((cpuTimeMs(pid) - cpu0) / (performance.now() - t0)) * 100;
}

async function agentIdle(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "bench-schedules-"));
  const args = ["--root", join(base, "root"), "--data-dir", join(base, "data")];
  try {
    let agent = await startAgentProcess(args);
    await sleep(1000);
    const baseCpu = await idleCpu(agent.child.pid!, IDLE_S);
    const baseRss = rssMiB(agent.child.pid!);

    const http = new Agent({ keepAlive: true, maxSockets: 8 });
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < CRONS) {
          const i = next++;
          await post(`${agent.url}/schedules`, { id: `cron-${i}`, type: "cron", ...quietCron(i), input: { command: "true" } }, http);
        }
      }),
    );
    const createS = (performance.now() - t0) / 1000;
    http.destroy();
    await sleep(1000);
    const loadedCpu = await idleCpu(agent.child.pid!, IDLE_S);
    const loadedRss = rssMiB(agent.child.pid!);
    const peak = peakRssMiB(agent.child.pid!);
    await agent.stop();

    const t1 = performance.now();
    agent = await startAgentProcess(args);
    const restartMs = performance.now() - t1;
    const reloadedRss = rssMiB(agent.child.pid!);
    await agent.stop();

    console.log(`agent with ${CRONS} cron schedules (created over HTTP in ${fmt(createS)} s, ${fmt(CRONS / createS, 0)}/s):`);
    console.log(`  idle CPU   ${fmt(loadedCpu, 2)} %   baseline (no schedules) ${fmt(baseCpu, 2)} %   target <= 2 %`);
    console.log(`  RSS        ${fmt(loadedRss)} MiB   baseline ${fmt(baseRss)} MiB   (peak ${fmt(peak)} MiB while creating)   target <= 200 MiB`);
    console.log(`  restart    ${fmt(restartMs, 0)} ms to re-arm all and listen, RSS after restart ${fmt(reloadedRss)} MiB`);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

/** Lateness of bare timers aimed at one instant: the floor any scheduler sits on. */
async function timerBaseline(count: number): Promise<number[]> {
  const due = Math.ceil(Date.now() / 1000) * 1000 + 1000;
  const late: number[] = [];
  await new Promise<void>((resolve) => {
    for (let i = 0; i < count; i++) {
      setTimeout(() => {
        late.push(nowMs() - due);
        if (late.length === count) resolve();
      }, due - Date.now());
    }
  });
  return late.sort((a, b) => a - b);
}

async function lateness(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-schedules-"));
  const db = openDatabase(join(dir, "agent.db"));
  migrate(db, SCHEDULE_MIGRATIONS);
  const starts = new Map<string, number>();
  const ended: RunnerProcess = { pid: "1", name: "", status: "completed", exitCode: 0, error: null };
  const runner: ScheduleRunner = {
    async start(req) {
      starts.set(req.name!, nowMs());
      return { ...ended, name: req.name!, status: "running" };
    },
    async waitForExit(name) {
      return { ...ended, name };
    },
    async logs() {
      return { stdout: "", stderr: "", logs: "" };
    },
    async kill() {},
  };
  const s = createSchedules({ db, runner, clock: systemClock, ids: uuidIds, logger: silentLogger(), sandbox: "bench" });
  s.scheduler.start();
  const t0 = performance.now();
  for (let i = 0; i < CRONS; i++) s.service.create(ScheduleBodySchema.parse({ id: `cron-${i}`, type: "cron", ...quietCron(i), input: { command: "true" } }));
  const createMs = performance.now() - t0;
  const due = Math.ceil(Date.now() / 1000) * 1000 + 2000;
  const at = new Date(due).toISOString();
  for (let i = 0; i < ATS; i++)
    s.service.create(ScheduleBodySchema.parse({ id: `at-${i}`, type: "at", value: at, input: { command: "true", name: `at-${i}` } }));
  while (starts.size < ATS) await sleep(50);
  await sleep(200);
  const late = [...starts.values()].map((t) => t - due).sort((a, b) => a - b);
  const recorded = s.store.listExecutions({}, { sort: "desc", limit: 1 }).total;
  s.scheduler.stop();
  db.close();
  rmSync(dir, { recursive: true, force: true });
  const base = await timerBaseline(ATS);
  const line = (xs: number[]) => `median ${fmt(percentile(xs, 50))} ms, p99 ${fmt(percentile(xs, 99))} ms, max ${fmt(xs[xs.length - 1]!)} ms`;
  console.log(`firing lateness, ${ATS} at schedules due in the same instant with ${CRONS} crons armed (${fmt((createMs / CRONS) * 1000, 0)} µs per create):`);
  console.log(`  scheduler  ${line(late)}   (${recorded} executions recorded)   target p99 <= 50 ms`);
  console.log(`  baseline   ${line(base)}   (${ATS} bare setTimeouts)`);
}

function recordingRate(): void {
  const dir = mkdtempSync(join(tmpdir(), "bench-schedules-"));
  const db = openDatabase(join(dir, "agent.db"));
  migrate(db, SCHEDULE_MIGRATIONS);
  const s = createSchedules({ db, runner: {} as ScheduleRunner, clock: systemClock, ids: uuidIds, logger: silentLogger(), sandbox: "bench" });
  s.service.create(ScheduleBodySchema.parse({ id: "rotating", type: "cron", value: "0 0 1 1 *", maxExecutions: 100, input: { command: "true" } }));
  s.service.create(ScheduleBodySchema.parse({ id: "plain", type: "cron", value: "0 0 1 1 *", maxExecutions: 10_000, input: { command: "true" } }));
  const row = (id: string, scheduleId: string) => ({
    id,
    schedule_id: scheduleId,
    sandbox: "bench",
    trigger: "schedule" as const,
    due_at: 0,
    created_at: Date.now(),
    executed_at: Date.now(),
    completed_at: null,
    status: "running" as const,
    status_code: 200,
    exit_code: null,
    process_name: `p-${id}`,
    timeout: 600,
    error: "",
    output: "",
  });
  const insert =
    db.prepare(`INSERT INTO schedule_executions (id, schedule_id, sandbox, trigger, due_at, created_at, executed_at, completed_at, status, status_code, exit_code, process_name, timeout, error, output)
    VALUES (@id, @schedule_id, @sandbox, @trigger, @due_at, @created_at, @executed_at, @completed_at, @status, @status_code, @exit_code, @process_name, @timeout, @error, @output)`);
  for (let i = 0; i < 100; i++) s.store.recordExecution(row(`warm-${i}`, "rotating"), 100); // full: every insert now rotates

  const measure = (batch: number, record: (i: number) => void): number => {
    const t = performance.now();
    for (let i = 0; i < RECORDS; i += batch) {
      s.store.transaction(() => {
        for (let j = i; j < Math.min(RECORDS, i + batch); j++) record(j);
      });
    }
    return RECORDS / ((performance.now() - t) / 1000);
  };
  const results: string[] = [];
  // 1 = firings spread out (one commit each); 100 = what one tick commits when 100 schedules fall due together.
  for (const batch of [1, 100]) {
    const base = measure(batch, (i) => insert.run(row(`b${batch}-${i}`, "plain")));
    const rate = measure(batch, (i) => s.store.recordExecution(row(`r${batch}-${i}`, "rotating"), 100));
    const label = batch === 1 ? "one commit per record     " : `${batch} records per commit   `;
    results.push(`  ${label} with rotation ${fmt(rate, 0)} /s   baseline (plain insert) ${fmt(base, 0)} /s   ratio ${fmt(rate / base, 2)}`);
  }
  const kept = s.store.listExecutions({ schedule_id: "rotating" }, { sort: "desc", limit: 1 }).total;
  db.close();
  rmSync(dir, { recursive: true, force: true });
  console.log(`execution records (${RECORDS} per line; WAL, synchronous=NORMAL; rotation keeps ${kept} = maxExecutions 100; target >= 10000 /s):`);
  for (const line of results) console.log(line);
}

const only = process.env.BENCH_ONLY; // records | lateness | idle
const started = performance.now();
if (!only || only === "records") recordingRate();
if (!only || only === "lateness") await lateness();
if (!only || only === "idle") await agentIdle();
console.log(`bench peak RSS ${fmt(peakRssMiB(process.pid))} MiB, total ${fmt((performance.now() - started) / 1000)} s`);
