/**
 * bench:standby — what standby costs and saves, under the default (isolating) launcher, beside baselines from
 * the same run:
 *   resume   the first request to a sandbox in standby minus the same request to it running, over R resumes
 *            (p50/p99), with where the time goes (the thaw itself: finding and continuing the sandbox's
 *            processes; the rest: the woken agent answering);
 *   idle CPU utime+stime of every process of N idle sandboxes (agent + a 1 s sleep loop each) over S seconds,
 *            running vs in standby;
 *   memory   MemAvailable drop per sandbox and PSS per sandbox running vs in standby (the same: without a
 *            checkpoint, memory stays; docs/launchers.md), and how many fit in MemAvailable;
 * then the process's peak RSS (simulator and client, in one process).
 *
 *   npm run bench:standby [-- --n 100] [--resumes 50] [--seconds 30]   (on a shared machine: --n 10 --seconds 10)
 *
 * The simulator runs in this process (imageSource host, test hooks: the bench forces standby rather than
 * waiting --standby-after). No assertion: a bench reports.
 */
import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { serveSimulator } from "../simulator/serve.js";
import type { FreezableAgent } from "../simulator/standby/controller.js";
import { treePssBytes } from "../simulator/launcher/proc.js";
import { fmt, peakRssMiB, percentile } from "./lib.js";

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
};
const N = Number(arg("n", "100"));
const RESUMES = Math.max(50, Number(arg("resumes", "50")));
const SECONDS = Number(arg("seconds", "30"));
const KEY = "bench-standby-admin-key";
const WS = "bench";

const memAvailableMiB = () => Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) / 1024;

/** utime+stime+cutime+cstime (ms) of every process in the PID namespaces (reaped children's time is in their parent's c-fields). */
function namespaceCpuMs(namespaces: Set<string>): number {
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!namespaces.has(readlinkSync(`/proc/${entry}/ns/pid`))) continue;
      const f = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ");
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      // Gone meanwhile.
    }
  }
  return ticks * 10; // USER_HZ 100
}

const sim = await serveSimulator({
  port: 0,
  imageSource: "host",
  apiKey: KEY,
  workspace: WS,
  testHooks: true,
  logLevel: "silent",
  standbyAfterMs: 0,
  warmSandboxes: 1,
  sandboxRetentionMs: 0,
});
const headers = { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" };
const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${sim.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text;
};
const setState = (sandbox: string, state: "STANDBY" | "RUNNING") => call("POST", "/_sim/standby", { workspace: WS, sandbox, state });
/** One cheap sandbox API request through the proxy (the agent's welcome on GET /), timed. */
const timedRequest = async (sandbox: string) => {
  const t = performance.now();
  await call("GET", `/sbx/${WS}/${sandbox}/`);
  return performance.now() - t;
};

try {
  const standby = sim.agents.standby;
  if (!standby) throw new Error("the default launcher cannot put sandboxes in standby here");
  // Where the resume time goes: the launcher's thaw, timed around the controller's call.
  const thawMs: number[] = [];
  const options = (standby as unknown as { options: { agent(key: string): FreezableAgent | undefined } }).options;
  const agentOf = options.agent.bind(options);
  options.agent = (key) => {
    const agent = agentOf(key);
    if (!agent) return agent;
    return {
      get canFreeze() {
        return agent.canFreeze;
      },
      freeze: () => agent.freeze(),
      thaw: async () => {
        const t = performance.now();
        await agent.thaw();
        thawMs.push(performance.now() - t);
      },
    };
  };

  // --- resume latency
  await call("POST", "/v0/sandboxes", { metadata: { name: "resume" } });
  await call("POST", `/sbx/${WS}/resume/process`, { command: "sh -c 'while :; do sleep 1; done'", waitForCompletion: false });
  for (let i = 0; i < 5; i++) await timedRequest("resume"); // warm the proxy's connections
  const running: number[] = [];
  const resumed: number[] = [];
  for (let i = 0; i < RESUMES; i++) {
    running.push(await timedRequest("resume"));
    await setState("resume", "STANDBY");
    resumed.push(await timedRequest("resume"));
  }
  const deltas = resumed.map((r, i) => r - running[i]!).sort((a, b) => a - b);
  running.sort((a, b) => a - b);
  resumed.sort((a, b) => a - b);
  thawMs.sort((a, b) => a - b);
  console.log(`resume (${RESUMES} resumes, GET / through the proxy, ms):`);
  console.log(`  running  request   p50 ${fmt(percentile(running, 50), 2)}  p99 ${fmt(percentile(running, 99), 2)}   (baseline)`);
  console.log(`  standby  request   p50 ${fmt(percentile(resumed, 50), 2)}  p99 ${fmt(percentile(resumed, 99), 2)}`);
  console.log(`  resume cost (diff) p50 ${fmt(percentile(deltas, 50), 2)}  p99 ${fmt(percentile(deltas, 99), 2)}   (the platform claims < 25 ms)`);
  console.log(
    `    of which thaw    p50 ${fmt(percentile(thawMs, 50), 2)}  p99 ${fmt(percentile(thawMs, 99), 2)}   (SIGCONT to each process stopped); the rest: the woken agent answering`,
  );

  // --- idle CPU and memory of N sandboxes
  const before = memAvailableMiB();
  const names = Array.from({ length: N }, (_, i) => `idle-${i}`);
  for (const name of names) {
    await call("POST", "/v0/sandboxes", { metadata: { name } });
    await call("POST", `/sbx/${WS}/${name}/process`, { command: "sh -c 'while :; do sleep 1; done'", waitForCompletion: false });
  }
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const perSandboxMiB = (before - memAvailableMiB()) / N;
  const pids = names.map((n) => sim.agents.get(WS, n)!.sandboxPid!);
  const namespaces = new Set(pids.map((p) => readlinkSync(`/proc/${p}/ns/pid`)));
  const pssRunning = treePssBytes(pids) / N / 2 ** 20;
  const measure = async () => {
    const start = namespaceCpuMs(namespaces);
    await new Promise((resolve) => setTimeout(resolve, SECONDS * 1_000));
    return namespaceCpuMs(namespaces) - start;
  };
  const runningCpu = await measure();
  for (const name of names) await setState(name, "STANDBY");
  const pssStandby = treePssBytes(pids) / N / 2 ** 20;
  const standbyCpu = await measure();
  const pctOfCore = (ms: number) => (ms / (SECONDS * 1_000)) * 100;
  console.log(`idle CPU of ${N} sandboxes over ${SECONDS} s (utime+stime of all their processes):`);
  console.log(`  running  ${fmt(runningCpu, 0)} ms = ${fmt(pctOfCore(runningCpu), 2)} % of one core   (baseline)`);
  console.log(
    `  standby  ${fmt(standbyCpu, 0)} ms = ${fmt(pctOfCore(standbyCpu), 2)} % of one core   (${runningCpu > 0 ? fmt(standbyCpu / runningCpu, 3) : "-"}× running; target ≤ 1 % of a core for 100)`,
  );
  console.log(
    `memory per sandbox: MemAvailable drop ${fmt(perSandboxMiB)} MiB; PSS running ${fmt(pssRunning)} MiB, standby ${fmt(pssStandby)} MiB (no checkpoint: memory stays)`,
  );
  const available = memAvailableMiB();
  // On a busy machine MemAvailable moves with other work: the PSS sum (what the sandboxes' pages cost) is the floor.
  const cost = Math.max(perSandboxMiB, pssRunning);
  console.log(
    `density: about ${Math.floor(available / cost)} more idle sandboxes fit in MemAvailable ${fmt(available, 0)} MiB at ${fmt(cost)} MiB each, running or in standby alike`,
  );
  console.log(`peak RSS (simulator + client, one process): ${fmt(peakRssMiB(process.pid))} MiB`);
} finally {
  await sim.stop();
}
