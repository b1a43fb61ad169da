/**
 * bench:hostile — what anonymous hostile requests cost the simulator,
 * beside a baseline measured in the same run on the same process:
 *
 * 1. Host-header routing: CPU per request with `Host: sbx-` + N × `a-` (default 7,000: ~14 KB, the
 *    attack's header), against CPU per anonymous `GET /health`. Before the fix each such request
 *    tried every dash as a sandbox/workspace split (~0.7 s of CPU); now an over-long host name is a
 *    400 before any lookup.
 * 2. Bodies before auth: RSS growth while C anonymous clients (default 100) each send a 9.9 MB body
 *    to `POST /v0/sandboxes` at once, against the RSS before; the peak (VmHWM) too. Before the fix
 *    every body was read into memory before the 401.
 *
 *   BENCH_HOSTILE_DASHES    label repetitions in the Host header (default 7000)
 *   BENCH_HOSTILE_REQUESTS  hostile-host requests (default 20)
 *   BENCH_HOSTILE_CLIENTS   concurrent anonymous bodies (default 100)
 *   BENCH_HOSTILE_WORKSPACES workspaces seeded (default 20: the old split loop read them all per dash)
 */
import { request } from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { cpuTimeMs, fmt, peakRssMiB, spawnListening } from "./lib.js";

const DASHES = Number(process.env.BENCH_HOSTILE_DASHES ?? 7000);
const REQUESTS = Number(process.env.BENCH_HOSTILE_REQUESTS ?? 20);
const CLIENTS = Number(process.env.BENCH_HOSTILE_CLIENTS ?? 100);
const WORKSPACES = Number(process.env.BENCH_HOSTILE_WORKSPACES ?? 20);
const BODY_BYTES = 9.9e6;

function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  return kb / 1024;
}

/** One request; resolves with the status (0 when the server cut the connection). */
function send(base: URL, opts: { method?: string; path: string; headers?: Record<string, string | number>; body?: Buffer }): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: base.hostname, port: base.port, method: opts.method ?? "GET", path: opts.path, headers: opts.headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
    req.end(opts.body);
  });
}

async function cpuPerRequest(pid: number, n: number, one: () => Promise<number>): Promise<{ ms: number; status: number }> {
  let status = 0;
  const before = cpuTimeMs(pid);
  for (let i = 0; i < n; i++) status = await one();
  return { ms: (cpuTimeMs(pid) - before) / n, status };
}

async function main(): Promise<void> {
  const simMain = fileURLToPath(new URL("../simulator/main.js", import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), "bench-hostile-"));
  const seed = join(dir, "seed.json");
  writeFileSync(seed, JSON.stringify({ workspaces: Array.from({ length: WORKSPACES }, (_, i) => ({ name: `ws-${i}`, accountId: "local" })) }));
  const sim = await spawnListening([simMain, "--port", "0", "--log-level", "silent", "--api-key", "bench-hostile-key", "--seed", seed]);
  const base = new URL(sim.url);
  const pid = sim.child.pid!;
  try {
    // Warm up both paths first (JIT), unmeasured.
    await cpuPerRequest(pid, 20, () => send(base, { path: "/health" }));
    const host = `sbx-${"a-".repeat(DASHES)}abc.us-pdx-1.localhost`;
    await send(base, { path: "/", headers: { host } });
    const health = await cpuPerRequest(pid, 200, () => send(base, { path: "/health" }));
    const hostile = await cpuPerRequest(pid, REQUESTS, () => send(base, { path: "/", headers: { host } }));
    console.log(
      `host routing: Host of ${host.length} bytes → HTTP ${hostile.status}, ${fmt(hostile.ms, 2)} ms CPU per request; baseline GET /health ${fmt(health.ms, 3)} ms; ratio ${fmt(hostile.ms / Math.max(health.ms, 0.001), 1)}×`,
    );

    const rssBefore = rssMiB(pid);
    const peakBefore = peakRssMiB(pid);
    const body = Buffer.alloc(BODY_BYTES, 0x61);
    let maxRss = rssBefore;
    const sampler = setInterval(() => (maxRss = Math.max(maxRss, rssMiB(pid))), 5);
    const statuses = await Promise.all(
      Array.from({ length: CLIENTS }, () =>
        send(base, { method: "POST", path: "/v0/sandboxes", headers: { "content-type": "application/json", "content-length": body.length }, body }),
      ),
    );
    clearInterval(sampler);
    const counts = new Map<number, number>();
    for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
    const summary = [...counts].map(([s, n]) => `${n}× ${s || "cut"}`).join(", ");
    console.log(
      `anonymous bodies: ${CLIENTS} × ${fmt(BODY_BYTES / 1e6)} MB at once → ${summary}; RSS +${fmt(maxRss - rssBefore)} MiB (sampled max ${fmt(maxRss)} MiB, baseline ${fmt(rssBefore)} MiB); peak RSS ${fmt(peakRssMiB(pid))} MiB (before ${fmt(peakBefore)} MiB)`,
    );
  } finally {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
