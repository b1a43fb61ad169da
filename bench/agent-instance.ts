/**
 * bench:agent-instance — what one sandbox's agent costs as an *instance* inside a host process instead of a Node
 * process of its own: the same openAgent + createApp the standalone agent runs (its own SQLite database, process
 * table, schedules, drives, watches, secrets key, multipart store), N of them side by side in this process, each
 * answering `/health` and a file read through one HTTP listener that routes by path prefix, then all disposed.
 * Printed: build time and CPU per instance (first and median), the first requests' time, heap, RSS and descriptors
 * per live instance, what disposal leaves (descriptors, handles), beside `node -e 0` and a standalone agent's start
 * to its first `/health` measured in the same run (the cost an instance replaces).
 *
 *   --n N   instances (default 100)
 */
import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openAgent, type AgentRuntime } from "../sandbox-agent/agent.js";
import { createApp } from "../sandbox-agent/app.js";
import { parseAgentConfig, type AgentConfig } from "../sandbox-agent/config.js";
import { fmt, percentile } from "./lib.js";

const { values } = parseArgs({ options: { n: { type: "string", default: "100" } } });
const N = Number(values.n);
const TOKEN = "bench-instance-token";
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

const fds = () => readdirSync("/proc/self/fd").length;
const handles = () => process.getActiveResourcesInfo().filter((r) => r !== "TTYWrap").length;
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** CPU of this process's reaped children (cutime + cstime of /proc/self/stat, USER_HZ 100), in ms. */
function childCpuMs(): number {
  const f = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ");
  return ((Number(f[13]) + Number(f[14])) * 1000) / 100;
}

/** Wall and CPU of `argv` run to its end (`ready`: resolves earlier, at that line on stdout, then kills it). */
async function timedProcess(argv: string[], env: NodeJS.ProcessEnv, ready?: RegExp): Promise<{ ms: number; cpu: number }> {
  const t = performance.now();
  const before = childCpuMs();
  const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ["ignore", "pipe", "ignore"] });
  let at = 0;
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      if (ready && !at && ready.test(out)) {
        at = performance.now();
        child.kill("SIGKILL");
      }
    });
    child.once("error", reject);
    child.once("exit", () => resolve());
  });
  return { ms: (at || performance.now()) - t, cpu: childCpuMs() - before };
}

function get(socket: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path, headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.once("error", reject);
    req.end();
  });
}

async function main(): Promise<void> {
  const base = join(tmpdir(), `bench-agent-instance-${process.pid}`);
  mkdirSync(base, { recursive: true });
  try {
    // Baselines of the same run: an empty Node, and the standalone agent's start to its listening line.
    const nodeE0 = [];
    const agentStart = [];
    for (let i = 0; i < 5; i++) {
      nodeE0.push(await timedProcess([process.execPath, "-e", "0"], {}));
      const data = join(base, `standalone-${i}`);
      mkdirSync(join(data, "root"), { recursive: true });
      const argv = [process.execPath, join(import.meta.dirname, "../sandbox-agent/main.js"), "--root", join(data, "root"), "--data-dir", join(data, "data")];
      agentStart.push(await timedProcess([...argv, "--port", "0"], { SANDBOX_AGENT_TOKEN: TOKEN, PATH: process.env.PATH }, /listening/));
    }

    gc();
    const fds0 = fds();
    const handles0 = handles();
    const heap0 = process.memoryUsage();
    const instances: { runtime: AgentRuntime; app: ReturnType<typeof createApp> }[] = [];
    const buildMs: number[] = [];
    const buildCpu: number[] = [];
    for (let i = 0; i < N; i++) {
      const root = join(base, `sbx-${i}`, "root");
      mkdirSync(root, { recursive: true });
      writeFileSync(join(root, "hello.txt"), `sandbox ${i}`);
      const t = performance.now();
      const c = cpuMs();
      const config = parseAgentConfig(["--root", root, "--data-dir", join(base, `sbx-${i}`, "data"), "--token", TOKEN], {}) as AgentConfig;
      const runtime = await openAgent(config, { baseEnv: { PATH: "/usr/bin:/bin", HOME: "/root" } });
      instances.push({ runtime, app: createApp(runtime.deps) });
      buildMs.push(performance.now() - t);
      buildCpu.push(cpuMs() - c);
    }

    // One listener for all: /sbx/<i>/... goes to instance i's app (what the simulator's in-process endpoint would do).
    const socket = join(base, "host.sock");
    const server: Server = createServer((req, res) => {
      const m = /^\/sbx\/(\d+)(\/.*)$/.exec(req.url ?? "");
      const target = m && instances[Number(m[1])];
      if (!target) return void res.writeHead(404).end();
      req.url = m[2];
      target.app(req, res);
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    const firstMs: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      const health = await get(socket, `/sbx/${i}/health`);
      const file = await get(socket, `/sbx/${i}/filesystem/hello.txt`);
      firstMs.push(performance.now() - t);
      if (health.status !== 200 || !file.body.includes(`sandbox ${i}`)) throw new Error(`instance ${i} answered ${health.status} / ${file.body.slice(0, 80)}`);
    }
    gc();
    const live = process.memoryUsage();
    const fdsLive = fds();

    const disposeMs: number[] = [];
    for (const instance of instances) {
      const t = performance.now();
      await instance.runtime.close();
      disposeMs.push(performance.now() - t);
    }
    instances.length = 0;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 50));
    gc();
    const after = process.memoryUsage();

    const med = (xs: number[]) =>
      percentile(
        [...xs].sort((a, b) => a - b),
        50,
      );
    const nodeMs = med(nodeE0.map((x) => x.ms));
    const nodeCpu = nodeE0.reduce((a, x) => a + x.cpu, 0) / nodeE0.length;
    const agentMs = med(agentStart.map((x) => x.ms));
    const agentCpu = agentStart.reduce((a, x) => a + x.cpu, 0) / agentStart.length;
    const mib = (b: number) => fmt(b / 1024 / 1024 / N, 2);
    console.log(`bench:agent-instance — ${N} agent instances in one process (openAgent + createApp each)`);
    console.log(`node -e 0 (same run)                 median ${fmt(nodeMs, 1)} ms, CPU ${fmt(nodeCpu, 1)} ms (mean of 5)`);
    console.log(`standalone agent to "listening"      median ${fmt(agentMs, 1)} ms, CPU ${fmt(agentCpu, 1)} ms (mean of 5)`);
    console.log(
      `instance build                       first ${fmt(buildMs[0]!, 1)} ms, median ${fmt(med(buildMs), 2)} ms, p90 ${fmt(
        percentile(
          [...buildMs].sort((a, b) => a - b),
          90,
        ),
        2,
      )} ms; CPU median ${fmt(med(buildCpu), 2)} ms | ratio to node -e 0 CPU ${fmt(med(buildCpu) / nodeCpu, 3)}, to the standalone agent's ${fmt(med(buildCpu) / agentCpu, 3)}`,
    );
    console.log(`first /health + file read            median ${fmt(med(firstMs), 2)} ms per instance`);
    console.log(
      `per live instance                    heap ${mib(live.heapUsed - heap0.heapUsed)} MiB, RSS ${mib(live.rss - heap0.rss)} MiB, external ${mib(live.external - heap0.external)} MiB, descriptors ${fmt((fdsLive - fds0) / N, 1)}`,
    );
    console.log(
      `disposal                             median ${fmt(med(disposeMs), 2)} ms; left behind: ${fds() - fds0} descriptors, ${handles() - handles0} handles, heap +${fmt((after.heapUsed - heap0.heapUsed) / 1024 / 1024, 2)} MiB over all ${N}`,
    );
    console.log(`peak RSS ${fmt(Number(/VmHWM:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024, 1)} MiB`);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
