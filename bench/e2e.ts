/**
 * bench:e2e — the sandbox path end to end, on loopback:
 *  1. create-to-ready: a sandbox-agent started by the process launcher until it
 *     answers GET /health (median and p99 over BENCH_E2E_SANDBOXES starts);
 *  2. upload throughput through the sandbox proxy as a ratio of uploading the
 *     same bytes straight to the same agent, measured alternately in this run;
 *  3. isolated sandboxes (the default launcher): create-to-ready and idle memory
 *     per sandbox, beside the process launcher (bench/isolation.ts);
 *  4. a one-RUN template built on a cached base, beside the builder run directly
 *     (bench/template.ts; `--template` runs this part alone).
 * `--launcher swarm` runs bench/swarm.ts alone instead: create-to-ready and /port/n uploads with the
 * swarm launcher beside the docker launcher (also `npm run bench:swarm`).
 *
 *   BENCH_E2E_SANDBOXES  sandboxes to start (default 50)
 *   BENCH_E2E_UPLOAD_MB  size of each upload (default 256)
 *   BENCH_E2E_ROUNDS     direct/proxy rounds, best of each kept (default 3)
 *   BENCH_E2E_COLD=1     also the first sandbox from empty caches (bench/first-sandbox.ts: a cold
 *                        image build, minutes and ~90 MB of downloads; off by default)
 */
import { fork } from "node:child_process";
import { benchProxy } from "./proxy.js";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { errors } from "../src/errors.js";
import { ProcessLauncher, type LaunchSpec } from "../simulator/launcher/index.js";
import { createSandboxProxy } from "../simulator/proxy/index.js";
import { benchFirstSandbox } from "./first-sandbox.js";
import { benchIsolation } from "./isolation.js";
import { benchSwarm } from "./swarm.js";
import { benchTemplate } from "./template.js";
import { cpuTimeMs, fmt, peakRssMiB, percentile } from "./lib.js";

const MiB = 1024 * 1024;
const sandboxes = Number(process.env.BENCH_E2E_SANDBOXES ?? 50);
const uploadMiB = Number(process.env.BENCH_E2E_UPLOAD_MB ?? 256);
const rounds = Number(process.env.BENCH_E2E_ROUNDS ?? 3);
const BOUNDARY = "----bench-e2e-boundary";
const CALLER_KEY = "bench-caller-key";

let base = ""; // made by main(), not by the proxy process
const cold = new ProcessLauncher();
const coldSamples = Math.min(10, sandboxes);
const spec = (name: string): LaunchSpec => ({
  workspace: "bench",
  sandbox: name,
  rootDir: join(base, name, "root"),
  dataDir: join(base, name, "data"),
  token: `token-${name}-abcdefgh`,
  logLevel: "warn",
});

/** Starts `count` sandboxes one after another (each stopped before the next), timing each start until healthy. */
async function createToReady(launcher: ProcessLauncher, count: number, prefix: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    await launcher.warmed();
    const start = performance.now();
    const agent = await launcher.start(spec(`${prefix}-${i}`));
    times.push(performance.now() - start);
    await agent.stop();
  }
  return times.sort((a, b) => a - b);
}

async function* body(): AsyncGenerator<Buffer> {
  yield Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const chunks = [Buffer.alloc(MiB, 1), Buffer.alloc(MiB, 2)];
  for (let i = 0; i < uploadMiB; i++) yield chunks[i % 2]!;
  yield Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
}

/** One multipart PUT of uploadMiB; returns MB/s. */
async function upload(url: string, authorization: string): Promise<number> {
  const start = performance.now();
  await new Promise<void>((resolve, reject) => {
    const req = request(url, { method: "PUT", headers: { authorization, "content-type": `multipart/form-data; boundary=${BOUNDARY}` } }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`PUT ${url}: ${res.statusCode}`))));
    });
    req.on("error", reject);
    pipeline(Readable.from(body()), req).catch(reject);
  });
  return (uploadMiB * MiB) / 1e6 / ((performance.now() - start) / 1000);
}

/**
 * The proxy in its own process, as in the simulator (the caller, the proxy
 * and the agent are three processes): `e2e.js --proxy <agentUrl> <token>`.
 */
async function serveProxy(agentUrl: string, token: string): Promise<void> {
  const proxy = createSandboxProxy({
    authorize: (req) => {
      if (req.headers.authorization !== `Bearer ${CALLER_KEY}`) throw errors.unauthorized();
    },
    upstream: () => ({ url: agentUrl, token }),
    workspaceOfId: () => undefined,
  });
  const server = createServer((req, res) => {
    if (!proxy.handle(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  process.send!(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  process.on("message", () => process.send!(peakRssMiB(process.pid), () => process.exit(0)));
}

/** CPU ms per MiB uploaded, summed over the rounds of one path: where the proxied path's time goes on a shared machine. */
interface CpuPerMiB {
  client: number;
  proxy: number;
  agent: number;
}

async function measured(pids: { agent?: number; proxy?: number }, cpu: CpuPerMiB, run: () => Promise<number>): Promise<number> {
  const at = () => ({ client: process.cpuUsage(), agent: pids.agent ? cpuTimeMs(pids.agent) : 0, proxy: pids.proxy ? cpuTimeMs(pids.proxy) : 0 });
  const before = at();
  const mbs = await run();
  const client = process.cpuUsage(before.client);
  cpu.client += (client.user + client.system) / 1000 / uploadMiB / rounds;
  cpu.agent += (at().agent - before.agent) / uploadMiB / rounds;
  cpu.proxy += (at().proxy - before.proxy) / uploadMiB / rounds;
  return mbs;
}

async function proxyRatio(): Promise<{ direct: number; proxied: number; proxyRss: number; directCpu: CpuPerMiB; proxiedCpu: CpuPerMiB }> {
  const s = spec("upload");
  const agent = await cold.start(s);
  const child = fork(fileURLToPath(import.meta.url), ["--proxy", agent.url, s.token]);
  try {
    const proxyUrl = await new Promise<string>((resolve, reject) => {
      child.once("message", (m) => resolve(String(m)));
      child.once("exit", (code) => reject(new Error(`proxy process exited with ${code}`)));
    });
    let direct = 0;
    let proxied = 0;
    const directCpu: CpuPerMiB = { client: 0, proxy: 0, agent: 0 };
    const proxiedCpu: CpuPerMiB = { client: 0, proxy: 0, agent: 0 };
    const pids = { agent: agent.pid, proxy: child.pid };
    await upload(`${agent.url}/filesystem/warmup.bin`, `Bearer ${s.token}`);
    // Alternating rounds, best of each: the machine is shared, and the best is each path's real capacity.
    for (let i = 0; i < rounds; i++) {
      direct = Math.max(direct, await measured(pids, directCpu, () => upload(`${agent.url}/filesystem/direct.bin`, `Bearer ${s.token}`)));
      proxied = Math.max(
        proxied,
        await measured(pids, proxiedCpu, () => upload(`${proxyUrl}/sbx/bench/upload/filesystem/proxied.bin`, `Bearer ${CALLER_KEY}`)),
      );
    }
    const proxyRss = await new Promise<number>((resolve) => {
      child.once("message", (m) => resolve(Number(m)));
      child.send("rss");
    });
    return { direct, proxied, proxyRss, directCpu, proxiedCpu };
  } finally {
    child.kill();
    await agent.stop();
  }
}

async function main(): Promise<void> {
  base = mkdtempSync(join(tmpdir(), "bench-e2e-"));
  try {
    // As the simulator runs it: one warm agent kept ready, refilled after each start
    // (creates one at a time, each after the refill: back-to-back creates cost a cold start each).
    const warmLauncher = new ProcessLauncher({ warm: 1 });
    const times = await createToReady(warmLauncher, sandboxes, "warm");
    await warmLauncher.close();
    const coldTimes = await createToReady(cold, coldSamples, "cold");
    console.log(`bench:e2e  loopback, process launcher; ${sandboxes} sandboxes, ${rounds} upload rounds of ${uploadMiB} MiB`);
    console.log(
      `create-to-ready (warm agent)  median ${fmt(percentile(times, 50))} ms | p99 ${fmt(percentile(times, 99))} ms (target median <= 300 ms) | baseline cold start (no warm agent, ${coldSamples} sandboxes) median ${fmt(percentile(coldTimes, 50))} ms`,
    );
    const { direct, proxied, proxyRss, directCpu, proxiedCpu } = await proxyRatio();
    console.log(`upload  through proxy ${fmt(proxied)} MB/s | straight to the agent ${fmt(direct)} MB/s | ratio ${fmt(proxied / direct, 2)} (target >= 0.85)`);
    const cpu = (c: CpuPerMiB) => `client ${fmt(c.client, 2)} + proxy ${fmt(c.proxy, 2)} + agent ${fmt(c.agent, 2)}`;
    console.log(
      `cpu     ms per MiB through proxy: ${cpu(proxiedCpu)} | straight: ${cpu(directCpu)} | ${cpus().length} CPUs, load average ${loadavg()
        .map((n) => fmt(n, 2))
        .join(" ")}`,
    );
    console.log(
      `memory  proxy process peak RSS ${fmt(proxyRss)} MiB after ${rounds} proxied uploads of ${uploadMiB} MiB | bench client peak RSS ${fmt(peakRssMiB(process.pid))} MiB`,
    );
    await benchIsolation(base);
    // Uploads through /port/n and a preview against the same upload straight to the in-sandbox server and
    // against http-proxy in the simulator's place (bench/proxy.ts, also `npm run bench:proxy` alone).
    await benchProxy();
    await benchTemplate();
    if (process.env.BENCH_E2E_COLD === "1") await benchFirstSandbox();
    else
      console.log(
        "first sandbox  skipped: a cold image build downloads ~90 MB; BENCH_E2E_COLD=1 npm run bench:e2e (or npm run bench:first-sandbox) measures npm start -> first command's output from empty caches",
      );
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

const proxyArgs = process.argv.indexOf("--proxy");
const launcherArg = process.argv.indexOf("--launcher");
const run =
  proxyArgs !== -1
    ? serveProxy(process.argv[proxyArgs + 1]!, process.argv[proxyArgs + 2]!)
    : process.argv.includes("--template")
      ? benchTemplate()
      : launcherArg !== -1 && process.argv[launcherArg + 1] === "swarm"
        ? benchSwarm()
        : main();
run.catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
