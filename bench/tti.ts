/**
 * bench:tti — time to interactive, measured the way computesdk/benchmarks measures sandbox platforms: through
 * the platform's SDK, create a sandbox, run an identity probe and `node -v` in it, destroy it. Three modes:
 * sequential (N one after another), staggered (N launched 200 ms apart) and burst (N at once). Against a
 * simulator on default settings (the isolating launcher, blaxel/base-image), started here as its own process so
 * its CPU (with its sandboxes', reaped) is measured apart from this client's.
 *
 *   npm run bench:tti [-- --n 100] [--modes sequential,staggered,burst] [--stagger-ms 200] [--agent-modes host,process]
 *
 * Both agent modes (--agent-mode of the simulator: the agent host, or an agent per sandbox) run in one bench run,
 * one simulator each in its own CPU cgroup, mode by mode interleaved; the ratios between them are printed last.
 *
 * Printed per mode: ok/total, min/median/p95/p99/max TTI, CPU-seconds per sandbox (the simulator's own cgroup:
 * simulator, agents, the probe's commands; where none can be made, the machine's busy time less this client's), the most sandboxes up at once, the machine's memory drop at its peak; beside the published
 * cloud figures (2026-05-05) for context. No assertion: a bench reports.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { cpuTimeMs, fmt, percentile, pointSdkAt, spawnListening, type Listening } from "./lib.js";

type Mode = "sequential" | "staggered" | "burst";
const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
};
const N = Number(arg("n", "100"));
const MODES = arg("modes", "sequential,staggered,burst").split(",") as Mode[];
const STAGGER_MS = Number(arg("stagger-ms", "200"));
const KEY = "bench-tti-admin-key";

/** Published cloud figures (median / p99 ms), computesdk/benchmarks 2026-05-05, for context only. */
const CLOUD: Record<Mode, string> = {
  sequential: "declaw 42/160, Daytona 186/560, e2b 491/740, the platform 525/597",
  staggered: "Daytona 210/487, the platform 539/638",
  burst: "Daytona 367/741, e2b 822/1048, the platform 1610/1829",
};

/**
 * Busy CPU seconds of the whole machine (/proc/stat: user, nice, system, irq, softirq, steal). A process tree's
 * own accounting misses the sandboxes: a sandbox's processes are reaped inside its PID namespace by an init that
 * dies with them, so their time never reaches the simulator's cutime. The machine's busy time, less this client's,
 * is what the simulator and its sandboxes cost (on an otherwise idle machine: the load average is printed).
 */
function machineBusySeconds(): number {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = f as [number, number, number, number, number, number, number, number];
  return (user + nice + system + irq + softirq + (steal ?? 0)) / 100;
}

/**
 * Spawns the simulator in a cgroup of its own and reads its CPU seconds (v1 cpuacct, or v2 cpu.stat) (v1 cpuacct, or v2 cpu.stat):
 * every process it forks, sandboxes included, stays in it, and on a machine shared with other work this is the
 * only exact figure. Where no cgroup can be made (not root, no controller), none: the machine's busy time
 * less this client's stands in.
 */
let cgroupSeq = 0;

async function inCpuCgroup<T>(spawn: () => Promise<T>): Promise<{ spawned: T; cgroup?: { seconds: () => number; remove: () => void } }> {
  const own = readFileSync("/proc/self/cgroup", "utf8");
  const candidates = [
    {
      root: "/sys/fs/cgroup/cpuacct",
      own: /^\d+:(?:[^:]*,)?cpuacct(?:,[^:]*)?:(.*)$/m.exec(own)?.[1],
      read: (d: string) => Number(readFileSync(join(d, "cpuacct.usage"), "utf8")) / 1e9,
    },
    {
      root: "/sys/fs/cgroup",
      own: /^0::(.*)$/m.exec(own)?.[1],
      read: (d: string) => Number(/usage_usec (\d+)/.exec(readFileSync(join(d, "cpu.stat"), "utf8"))![1]) / 1e6,
    },
  ];
  for (const { root, own: ownPath, read } of candidates) {
    const dir = join(root, `bench-tti-${process.pid}-${cgroupSeq++}`);
    if (ownPath === undefined) continue;
    try {
      mkdirSync(dir);
    } catch {
      continue;
    }
    try {
      // This process joins the group just long enough to fork the simulator into it (children inherit the group).
      writeFileSync(join(dir, "cgroup.procs"), String(process.pid));
      read(dir);
    } catch {
      try {
        rmdirSync(dir);
      } catch {
        // not ours to keep
      }
      continue;
    }
    let spawned: T;
    try {
      spawned = await spawn();
    } finally {
      writeFileSync(join(root, ownPath, "cgroup.procs"), String(process.pid));
    }
    return {
      spawned,
      cgroup: {
        seconds: () => read(dir),
        remove: () => {
          try {
            rmdirSync(dir); // empty once the simulator and its sandboxes are gone
          } catch {
            // a straggler still in it: the kernel keeps the empty group for a later run to remove
          }
        },
      },
    };
  }
  return { spawned: await spawn() };
}

const clientSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

function memAvailableMiB(): number {
  return Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) / 1024;
}

interface Outcome {
  ok: boolean;
  ms: number;
  error?: string;
}

type AgentMode = "host" | "process";
const AGENT_MODES = arg("agent-modes", "host,process").split(",") as AgentMode[];

/**
 * One mode against one simulator, in a process of its own (the SDK is configured once per process, from its
 * environment): prints its outcomes as one JSON line. Its CPU is not in the simulator's cgroup.
 */
async function runner(): Promise<void> {
  pointSdkAt(arg("url", ""), KEY);
  const { SandboxInstance } = await import("@blaxel/core");
  const mode = arg("mode", "sequential") as Mode | "warmup";
  const n = Number(arg("n", "1"));
  let seq = 0;
  let up = 0;
  let maxUp = 0;
  /** One iteration: create, probe, `node -v`, destroy; TTI ends at node's answer. */
  async function once(): Promise<Outcome> {
    const name = `tti-${process.pid}-${seq++}`;
    const started = performance.now();
    let sandbox: Awaited<ReturnType<typeof SandboxInstance.create>> | undefined;
    try {
      sandbox = await SandboxInstance.create({ name });
      up++;
      maxUp = Math.max(maxUp, up);
      const probe = await sandbox.process.exec({
        command: "echo $(hostname) $(readlink /proc/1/ns/pid) $(readlink /proc/self/ns/mnt)",
        waitForCompletion: true,
      });
      if (probe.exitCode !== 0) throw new Error(`probe exited ${probe.exitCode}`);
      const node = await sandbox.process.exec({ command: "node -v", waitForCompletion: true });
      if (!/^v\d+\./.test(node.stdout?.trim() ?? "")) throw new Error(`node -v printed ${JSON.stringify(node.stdout)}`);
      return { ok: true, ms: performance.now() - started };
    } catch (err) {
      return { ok: false, ms: performance.now() - started, error: (err as Error).message.slice(0, 200) };
    } finally {
      if (sandbox) {
        await SandboxInstance.delete(name).catch(() => undefined);
        up--;
      }
    }
  }
  let outcomes: Outcome[];
  if (mode === "sequential" || mode === "warmup") {
    outcomes = [];
    for (let i = 0; i < n; i++) outcomes.push(await once());
  } else if (mode === "staggered") {
    outcomes = await Promise.all(Array.from({ length: n }, (_, i) => new Promise<Outcome>((resolve) => setTimeout(() => resolve(once()), i * STAGGER_MS))));
  } else {
    outcomes = await Promise.all(Array.from({ length: n }, () => once()));
  }
  process.stdout.write(`${JSON.stringify({ outcomes, maxUp })}\n`);
}

/** Runs the runner for `mode` against `url`; resolves with its outcomes. */
function runMode(url: string, mode: Mode | "warmup", n: number): Promise<{ outcomes: Outcome[]; maxUp: number }> {
  const self = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [self, "--runner", "--url", url, "--mode", mode, "--n", String(n), "--stagger-ms", String(STAGGER_MS)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.once("exit", (code) => {
      const line = out.trim().split("\n").pop() ?? "";
      try {
        resolve(JSON.parse(line) as { outcomes: Outcome[]; maxUp: number });
      } catch {
        reject(new Error(`the ${mode} runner exited ${code}: ${out.slice(-300)}`));
      }
    });
  });
}

/** CPU seconds of `node -e 0` (mean of 5, this machine, this run): the unit the per-sandbox figures are read in. */
function bareNodeSeconds(): number {
  const ticks = () => {
    const f = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ");
    return Number(f[13]) + Number(f[14]); // cutime, cstime of waited-for children
  };
  const t0 = ticks();
  for (let i = 0; i < 5; i++) spawnSync(process.execPath, ["-e", "0"]);
  return (ticks() - t0) / 100 / 5;
}

interface Simulator {
  mode: AgentMode;
  sim: Listening;
  cpuSeconds: () => number;
  cgroup?: { remove: () => void };
}

interface Row {
  ok: number[];
  n: number;
  cpuPer: number;
  simPer: number;
  maxUp: number;
  memDrop: number;
  wall: number;
  failures: string[];
}

async function measure(s: Simulator, mode: Mode): Promise<Row> {
  await new Promise((r) => setTimeout(r, 2_000)); // the previous mode's sandboxes are gone, a warm pool refilled
  const cpu0 = s.cpuSeconds();
  const simCpu0 = cpuTimeMs(s.sim.child.pid!);
  const mem0 = memAvailableMiB();
  let memLow = mem0;
  const sampler = setInterval(() => (memLow = Math.min(memLow, memAvailableMiB())), 100);
  const t0 = performance.now();
  const { outcomes, maxUp } = await runMode(s.sim.url, mode, N);
  const wall = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const ok = outcomes
    .filter((o) => o.ok)
    .map((o) => o.ms)
    .sort((a, b) => a - b);
  return {
    ok,
    n: N,
    cpuPer: (s.cpuSeconds() - cpu0) / N,
    simPer: (cpuTimeMs(s.sim.child.pid!) - simCpu0) / 1000 / N,
    maxUp,
    memDrop: mem0 - memLow,
    wall,
    failures: [...new Set(outcomes.filter((o) => !o.ok).map((o) => o.error ?? ""))].slice(0, 3),
  };
}

const median = (r: Row) => (r.ok.length ? percentile(r.ok, 50) : NaN);
const p99 = (r: Row) => (r.ok.length ? percentile(r.ok, 99) : NaN);

async function main(): Promise<void> {
  if (process.argv.includes("--runner")) return runner();
  const simMain = fileURLToPath(new URL("../simulator/main.js", import.meta.url));
  const sims: Simulator[] = [];
  try {
    for (const mode of AGENT_MODES) {
      const { spawned: sim, cgroup } = await inCpuCgroup<Listening>(() =>
        spawnListening([simMain, "--port", "0", "--api-key", KEY, "--log-level", "warn", "--agent-mode", mode, "--data", ":memory:"]),
      );
      sims.push({ mode, sim, cgroup, cpuSeconds: cgroup ? cgroup.seconds : () => machineBusySeconds() - clientSeconds() });
      // The default image is built (or found in the cache) and a warm sandbox started before anything is timed.
      const warm = await runMode(sim.url, "warmup", 1);
      if (!warm.outcomes[0]?.ok) throw new Error(`the ${mode} warm-up sandbox failed: ${warm.outcomes[0]?.error}`);
    }
    const node = bareNodeSeconds();
    const cpuWhat = sims[0]!.cgroup
      ? "each simulator's cgroup: simulator, agent host or agents, sandboxes, probes"
      : "the machine's busy time less this client's";
    console.log(
      `bench:tti  ${N} sandboxes per mode and agent mode (${AGENT_MODES.join(", ")}, interleaved) through @blaxel/core against sandbox-sim (default launcher, blaxel/base-image); ${cpus().length} CPUs, load average ${loadavg()
        .map((n) => fmt(n, 2))
        .join(" ")}; node -e 0 costs ${fmt(node, 3)} CPU-s here (this run); CPU is ${cpuWhat}`,
    );
    const rows: Record<string, Record<string, Row>> = {};
    for (const mode of MODES) {
      rows[mode] = {};
      for (const s of sims) {
        const r = (rows[mode]![s.mode] = await measure(s, mode));
        const p = (q: number) => (r.ok.length === 0 ? "-" : fmt(q === 0 ? r.ok[0]! : percentile(r.ok, q), 0));
        console.log(
          `${mode.padEnd(10)} ${s.mode.padEnd(7)} ${r.ok.length}/${N} ok | TTI ms min ${p(0)} median ${p(50)} p95 ${p(95)} p99 ${p(99)} max ${p(100)} | ` +
            `CPU ${fmt(r.cpuPer, 3)} s per sandbox = ${fmt(r.cpuPer / node, 1)}× node -e 0 (the simulator's own process ${fmt(r.simPer, 3)}, the rest: namespaces, agents, commands ${fmt(r.cpuPer - r.simPer, 3)}) | most up at once ${r.maxUp} | memory drop at peak ${fmt(r.memDrop, 0)} MiB | ${fmt(r.wall, 1)} s`,
        );
        if (r.failures.length > 0) console.log(`           failures: ${r.failures.join(" | ")}`);
      }
      console.log(`           cloud (median/p99 ms, for context): ${CLOUD[mode]}`);
    }
    if (AGENT_MODES.includes("host") && AGENT_MODES.includes("process")) {
      const cpuRatio = MODES.map((m) => rows[m]!.host!.cpuPer / rows[m]!.process!.cpuPer);
      console.log(`ratios     CPU per sandbox host/process: ${MODES.map((m, i) => `${m} ${fmt(cpuRatio[i]!, 2)}`).join(", ")}`);
      if (rows.burst) console.log(`           burst p99 host/process: ${fmt(p99(rows.burst.host!) / p99(rows.burst.process!), 2)}`);
      if (rows.staggered && rows.sequential)
        for (const m of AGENT_MODES)
          console.log(`           ${m}: staggered median / sequential median ${fmt(median(rows.staggered[m]!) / median(rows.sequential[m]!), 2)}`);
      if (rows.sequential)
        console.log(`           sequential median host/process: ${fmt(median(rows.sequential.host!) / median(rows.sequential.process!), 2)}`);
    }
  } finally {
    for (const s of sims) {
      await s.sim.stop();
      s.cgroup?.remove();
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
