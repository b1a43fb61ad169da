/**
 * bench:confine — what kernel confinement (openat2) costs beside the agent's own descriptor walk
 * (path-checks), measured in the same run on the same tree: two agents, one per mode, get the same
 * requests in alternating rounds (the machine's load drifts alike for both). Three operations on a
 * file six directories deep: read (GET), write (PUT, atomic), list (GET of its directory); then the
 * resolution alone, in this process (SandboxPaths.use, no HTTP). Each agent's peak RSS.
 *
 *   BENCH_CONFINE_N        requests per operation and mode (default 2000)
 *   BENCH_CONFINE_CLIENTS  concurrent clients (default 8)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openat2Support } from "../sandbox-agent/paths/openat2.js";
import { SandboxPaths } from "../sandbox-agent/paths/sandbox-path.js";
import { fmt, peakRssMiB, percentile, startAgentProcess, type Listening } from "./lib.js";

const N = Number(process.env.BENCH_CONFINE_N ?? 2000);
const CLIENTS = Number(process.env.BENCH_CONFINE_CLIENTS ?? 8);
const ROUNDS = 4;
const DIR = "/a/b/c/d/e/f";
const MODES = ["openat2", "path-checks"] as const;
type Mode = (typeof MODES)[number];

const keepAlive = new Agent({ keepAlive: true, maxSockets: CLIENTS });

function call(url: string, method: string, body?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent: keepAlive, headers: body ? { "Content-Type": "application/json" } : {} }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`${method} ${url}: ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const OPS: Record<string, (url: string, i: number) => Promise<void>> = {
  read: (url) => call(`${url}/filesystem${DIR}/file.txt`, "GET"),
  write: (url, i) => call(`${url}/filesystem${DIR}/w-${i % 50}.txt`, "PUT", JSON.stringify({ content: "written" })),
  list: (url) => call(`${url}/filesystem${DIR}`, "GET"),
};

/** `n` calls by CLIENTS concurrent clients; returns the wall time and each call's latency. */
async function run(fn: (i: number) => Promise<void>, n: number): Promise<{ ms: number; latencies: number[] }> {
  const latencies: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < n) {
        const i = next++;
        const t = performance.now();
        await fn(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { ms: performance.now() - start, latencies: latencies.sort((a, b) => a - b) };
}

function makeRoot(base: string, mode: string): string {
  const root = join(base, mode, "root");
  mkdirSync(join(root, DIR), { recursive: true });
  writeFileSync(join(root, DIR, "file.txt"), "x".repeat(4096));
  for (let i = 0; i < 100; i++) writeFileSync(join(root, DIR, `entry-${i}`), "y");
  return root;
}

async function main(): Promise<void> {
  const support = openat2Support();
  if (!support.available) {
    console.log(`bench:confine  openat2 is not available here (${support.reason}): nothing to compare`);
    return;
  }
  const base = mkdtempSync(join(tmpdir(), "bench-confine-"));
  const agents = new Map<Mode, Listening>();
  try {
    for (const mode of MODES) {
      agents.set(mode, await startAgentProcess(["--root", makeRoot(base, mode), "--data-dir", join(base, mode, "data"), "--confinement", mode]));
    }
    console.log(
      `bench:confine  ${N} requests per operation and mode, ${CLIENTS} clients, ${ROUNDS} alternating rounds, a file ${DIR.split("/").length - 1} directories deep`,
    );
    for (const [name, op] of Object.entries(OPS)) {
      const times: Record<Mode, { ms: number; latencies: number[] }> = { openat2: { ms: 0, latencies: [] }, "path-checks": { ms: 0, latencies: [] } };
      for (const mode of MODES) await run((i) => op(agents.get(mode)!.url, i), 50); // warm-up
      for (let round = 0; round < ROUNDS; round++) {
        for (const mode of round % 2 === 0 ? MODES : [...MODES].reverse()) {
          const r = await run((i) => op(agents.get(mode)!.url, i), Math.ceil(N / ROUNDS));
          times[mode].ms += r.ms;
          times[mode].latencies.push(...r.latencies);
        }
      }
      const line = MODES.map((mode) => {
        const t = times[mode];
        t.latencies.sort((a, b) => a - b);
        return `${mode} ${fmt((t.latencies.length / t.ms) * 1000, 0)} req/s p50 ${fmt(percentile(t.latencies, 50), 2)} ms p99 ${fmt(percentile(t.latencies, 99), 2)} ms`;
      });
      console.log(`${name.padEnd(6)} ${line.join(" | ")} | ratio (openat2 / path-checks time) ${fmt(times.openat2.ms / times["path-checks"].ms, 2)}`);
    }
    // Resolution alone, no HTTP: what each mechanism costs per path.
    const inProcess: Record<string, number> = {};
    for (const mode of MODES) {
      const paths = new SandboxPaths(join(base, mode, "root"), { confinement: mode });
      const resolve = () => paths.use(`${DIR}/file.txt`, { follow: true }, async () => undefined);
      await run(resolve, 200);
      inProcess[mode] = (await run(resolve, N)).ms;
      await paths.close();
    }
    console.log(
      `resolve (in process, ${N} paths) openat2 ${fmt((inProcess.openat2! / N) * 1000, 1)} µs/path | path-checks ${fmt((inProcess["path-checks"]! / N) * 1000, 1)} µs/path | ratio ${fmt(inProcess.openat2! / inProcess["path-checks"]!, 2)}`,
    );
    console.log(
      `memory  peak RSS openat2 agent ${fmt(peakRssMiB(agents.get("openat2")!.child.pid!))} MiB | path-checks agent ${fmt(peakRssMiB(agents.get("path-checks")!.child.pid!))} MiB`,
    );
  } finally {
    for (const agent of agents.values()) await agent.stop();
    keepAlive.destroy();
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
