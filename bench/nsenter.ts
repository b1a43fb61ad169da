/**
 * bench:nsenter — what it costs an agent host to start a command inside a sandbox from outside it, per command:
 * wall time from spawn to exit and CPU (this process's spawn work plus every process of the chain, from
 * /proc/self/stat's reaped-children times), for `sh -c true` started
 *   - plain:            spawned on the host, no sandbox (the floor: Node's spawn, the shell);
 *   - setpriv (today):  through the kit's capability wrapper, as the in-sandbox agent starts every command;
 *   - nsenter+setpriv:  util-linux nsenter into the namespaces of a bwrap sandbox's PID 1 (--root, --wd), then
 *                       setpriv for the same capability limit (nsenter cannot drop capabilities itself);
 *   - nsexec:           native/nsexec (sandbox-agent/process/ns-spawn.ts), which enters, forks, drops and execs
 *                       itself, and reports the command's pids before mirroring its exit.
 * Then each chain again N times from a shell loop (no Node spawn, no report pipe): what the chain itself costs.
 * The kinds run interleaved in rounds against one real sandbox (bwrap with its own user, mount, PID, network,
 * IPC, UTS and cgroup namespaces), each printed beside the plain spawn of the same run as a ratio.
 *
 *   --n N   commands of each kind (default 200)
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import type { Readable } from "node:stream";
import { parseArgs } from "node:util";
import { COMMAND_CAPABILITIES } from "../simulator/launcher/sandbox-kit.js";
import { nsexecArgs, nsexecPath } from "../sandbox-agent/process/ns-spawn.js";
import { fmt, peakRssMiB, percentile } from "./lib.js";

const { values } = parseArgs({ options: { n: { type: "string", default: "200" } } });
const N = Number(values.n);
const ROUNDS = 10;

/** This process's CPU plus that of its reaped children (and theirs), in ms. */
function cpuWithChildrenMs(): number {
  const f = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ");
  // utime, stime, cutime, cstime: fields 14-17, in USER_HZ (100) ticks.
  return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100;
}

function runOnce(argv: string[], withReport: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ["ignore", "ignore", "inherit", ...(withReport ? (["pipe"] as const) : [])] });
    if (withReport) (child.stdio[3] as Readable).resume();
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${argv.join(" ")} exited ${code}`))));
  });
}

async function startSandbox(): Promise<{ pid: number; stop(): void }> {
  const args = ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"];
  const bwrap = spawn(
    "bwrap",
    [...args, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--info-fd", "3", "--", "sleep", "infinity"],
    {
      stdio: ["ignore", "ignore", "inherit", "pipe"],
    },
  );
  const info = await new Promise<string>((resolve, reject) => {
    let text = "";
    (bwrap.stdio[3] as Readable).on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes("}")) resolve(text);
    });
    bwrap.once("exit", (code) => reject(new Error(`bwrap exited ${code}`)));
  });
  const pid = Number(/"child-pid":\s*(\d+)/.exec(info)![1]);
  return {
    pid,
    stop: () => {
      process.kill(pid, "SIGKILL");
      bwrap.kill("SIGKILL");
    },
  };
}

interface Kind {
  name: string;
  argv: string[];
  report?: boolean;
  ms: number[];
  cpuMs: number;
  /** The same chain started N times by a shell loop (no Node, no report pipe): the chain's own cost. */
  loop?: { ms: number; cpuMs: number };
}

/** Runs `argv` `n` times from a shell loop; wall and CPU (the whole loop's, its shell included) per run. */
async function shellLoop(argv: string[], n: number): Promise<{ ms: number; cpuMs: number }> {
  const before = cpuWithChildrenMs();
  const t = performance.now();
  await runOnce(["/bin/sh", "-c", `i=0; while [ $i -lt ${n} ]; do "$@" || exit 1; i=$((i+1)); done`, "loop", ...argv], false);
  return { ms: (performance.now() - t) / n, cpuMs: (cpuWithChildrenMs() - before) / n };
}

async function main(): Promise<void> {
  const helper = nsexecPath();
  if (!helper) throw new Error("dist/native/nsexec is not built: npm run build (needs a C compiler)");
  const nsenter = spawnSync("nsenter", ["--version"]).status === 0 ? "nsenter" : undefined;
  const sandbox = await startSandbox();
  const sh = ["/bin/sh", "-c", "true"];
  const setpriv = ["setpriv", "--inh-caps=-all", `--bounding-set=-all,${COMMAND_CAPABILITIES.map((c) => `+${c}`).join(",")}`, "--"];
  const enter = ["--target", String(sandbox.pid), "--user", "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup", "--root", "--wd=/"];
  const kinds: Kind[] = [
    { name: "plain spawn (no sandbox)", argv: sh, ms: [], cpuMs: 0 },
    { name: "setpriv (the in-sandbox agent's)", argv: [...setpriv, ...sh], ms: [], cpuMs: 0 },
    ...(nsenter ? [{ name: "nsenter + setpriv", argv: [nsenter, ...enter, ...setpriv, ...sh], ms: [], cpuMs: 0 }] : []),
    {
      name: "nsexec",
      argv: [helper, ...nsexecArgs({ pid: sandbox.pid, capabilities: COMMAND_CAPABILITIES }, "/", { reportFd: 3 }), ...sh],
      report: true,
      ms: [],
      cpuMs: 0,
    },
  ];
  try {
    for (const kind of kinds) await runOnce(kind.argv, kind.report ?? false); // warm the page cache
    const perRound = Math.max(1, Math.round(N / ROUNDS));
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of kinds) {
        const cpuBefore = cpuWithChildrenMs();
        for (let i = 0; i < perRound; i++) {
          const t = performance.now();
          await runOnce(kind.argv, kind.report ?? false);
          kind.ms.push(performance.now() - t);
        }
        kind.cpuMs += cpuWithChildrenMs() - cpuBefore;
      }
    }
    for (const kind of kinds) {
      // Without --report (nothing reads it in a loop).
      const argv = kind.report ? kind.argv.filter((a, i, all) => a !== "--report" && all[i - 1] !== "--report") : kind.argv;
      kind.loop = await shellLoop(argv, kinds[0]!.ms.length);
    }
  } finally {
    sandbox.stop();
  }
  const load = loadavg()[0]!;
  console.log(
    `bench:nsenter — sh -c true per command, ${kinds[0]!.ms.length} of each kind in ${ROUNDS} interleaved rounds (${cpus().length} CPUs, load ${fmt(load, 2)})`,
  );
  const base = kinds[0]!;
  const baseCpu = base.cpuMs / base.ms.length;
  const baseMedian = percentile(
    [...base.ms].sort((a, b) => a - b),
    50,
  );
  for (const kind of kinds) {
    const sorted = [...kind.ms].sort((a, b) => a - b);
    const median = percentile(sorted, 50);
    const cpu = kind.cpuMs / kind.ms.length;
    console.log(
      `${kind.name.padEnd(34)} median ${fmt(median, 2).padStart(6)} ms  p90 ${fmt(percentile(sorted, 90), 2).padStart(6)} ms  CPU ${fmt(cpu, 2).padStart(5)} ms/command | ratio to plain: time ${fmt(median / baseMedian, 2)}, CPU ${fmt(cpu / baseCpu, 2)}`,
    );
  }
  const baseLoop = base.loop!;
  console.log(`the same chains from a shell loop (no Node spawn, no report pipe), per command:`);
  for (const kind of kinds) {
    const loop = kind.loop!;
    console.log(
      `${kind.name.padEnd(34)} ${fmt(loop.ms, 2).padStart(6)} ms  CPU ${fmt(loop.cpuMs, 2).padStart(5)} ms/command | ratio to plain: time ${fmt(loop.ms / baseLoop.ms, 2)}, CPU ${fmt(loop.cpuMs / baseLoop.cpuMs, 2)}`,
    );
  }
  console.log(`peak RSS of the bench ${fmt(peakRssMiB(process.pid), 1)} MiB`);
}

await main();
