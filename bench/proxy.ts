/**
 * bench:proxy — uploads to a server inside a sandbox, on loopback, by every
 * path a program has to it, measured alternately in this run:
 *   direct      straight to the in-sandbox server (the baseline);
 *   /port/n     the sandbox URL's /port/{n}: simulator proxy → agent → server;
 *   preview     a public preview's URL: the same two hops;
 *   http-proxy  the well-known Node proxy library in the simulator's place,
 *               in front of the same agent's /port/{n} (the same job);
 * at two sizes, with each process's peak RSS after each size: the proxy's
 * memory must not grow with the upload. Each process is its own (client,
 * simulator, agent, server, http-proxy), as in use.
 *
 *   BENCH_PROXY_SMALL_MB  first size (default 64)
 *   BENCH_PROXY_LARGE_MB  second size (default 512)
 *   BENCH_PROXY_ROUNDS    rounds per size, best of each path kept (default 2)
 */
import { fork, type ChildProcess } from "node:child_process";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg } from "node:os";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import httpProxy from "http-proxy";
import { serveSimulator } from "../simulator/agents/serve.js";
import { fmt, peakRssMiB } from "./lib.js";

const MiB = 1024 * 1024;
const sizes = [Number(process.env.BENCH_PROXY_SMALL_MB ?? 64), Number(process.env.BENCH_PROXY_LARGE_MB ?? 512)];
const rounds = Number(process.env.BENCH_PROXY_ROUNDS ?? 2);
const KEY = "bench-proxy-admin-key";
const SELF = fileURLToPath(import.meta.url);

type Reply = { url?: string; agentUrl?: string; token?: string; agentPid?: number; preview?: string; rss?: number };

/** A child process of this script in one role; answers "rss" with its peak RSS. */
function role(name: string, ...args: string[]): Promise<{ child: ChildProcess; first: Reply; ask(m: unknown): Promise<Reply> }> {
  const child = fork(SELF, [`--${name}`, ...args], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const next = () => new Promise<Reply>((resolve, reject) => {
    child.once("message", (m) => resolve(m as Reply));
    child.once("exit", (code) => reject(new Error(`${name} process exited with ${code}`)));
  });
  return next().then((first) => ({ child, first, ask: (m: unknown) => { const r = next(); child.send(m as object); return r; } }));
}

function answerRss(extra: () => Reply = () => ({})): void {
  process.on("message", () => process.send!({ rss: peakRssMiB(process.pid), ...extra() }));
}

/** The in-sandbox server: counts the bytes of each upload. */
async function serveApp(): Promise<void> {
  const server = createServer((req, res) => {
    let bytes = 0;
    req.on("data", (d: Buffer) => (bytes += d.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ bytes })));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  process.send!({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  answerRss();
}

/** The simulator, with one sandbox (its agent started by the process launcher) and a public preview of the server's port. */
async function serveSim(appPort: string): Promise<void> {
  const sim = await serveSimulator({ port: 0, apiKey: KEY, logLevel: "silent" }, { launcher: "process" });
  const headers = { "x-blaxel-authorization": `Bearer ${KEY}`, "x-blaxel-workspace": "default", "content-type": "application/json" };
  const create = await fetch(`${sim.url}/v0/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "bench" } }) });
  if (!create.ok) throw new Error(`create: ${create.status} ${await create.text()}`);
  const preview = await fetch(`${sim.url}/v0/sandboxes/bench/previews`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "app" }, spec: { port: Number(appPort), public: true } }) });
  const { spec } = (await preview.json()) as { spec: { url: string } };
  const agent = sim.deps.agents!.get("default", "bench")!;
  const { token } = await sim.deps.agents!.upstream({ workspace: "default", sandbox: "bench", path: "/" });
  process.send!({ url: sim.url, agentUrl: agent.url, token, agentPid: agent.pid, preview: spec.url });
  answerRss(() => ({ agentPid: agent.pid }));
  process.on("disconnect", () => void sim.stop().then(() => process.exit(0)));
}

/** http-proxy in the simulator's place: in front of the same agent, adding the sandbox's token as the simulator does. */
async function serveHttpProxy(agentUrl: string, token: string): Promise<void> {
  const proxy = httpProxy.createProxyServer({ target: agentUrl, headers: { "x-blaxel-authorization": `Bearer ${token}` } });
  proxy.on("error", (_err, _req, res) => (res as { destroy(): void }).destroy());
  const server = createServer((req, res) => proxy.web(req, res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  process.send!({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  answerRss();
}

/** One PUT of `mib` MiB in 1 MiB writes, honouring backpressure; returns MB/s. */
function upload(url: string, mib: number, headers: Record<string, string> = {}): Promise<number> {
  const chunk = Buffer.alloc(MiB, 5);
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "PUT", headers: { ...headers, "content-type": "application/octet-stream", "content-length": mib * MiB } }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        if (res.statusCode !== 200 || (JSON.parse(text) as { bytes: number }).bytes !== mib * MiB) return reject(new Error(`PUT ${url}: ${res.statusCode} ${text.slice(0, 200)}`));
        resolve((mib * MiB) / 1e6 / ((performance.now() - start) / 1000));
      });
    });
    req.on("error", reject);
    let sent = 0;
    const more = () => {
      while (sent < mib) {
        sent++;
        if (!req.write(chunk)) return void req.once("drain", more);
      }
      req.end();
    };
    more();
  });
}

/** The whole bench; bench:e2e may call it too (the roles run as child processes of this file either way). */
export async function benchProxy(log: (line: string) => void = console.log): Promise<void> {
  const started = performance.now();
  const app = await role("app");
  const appUrl = app.first.url!;
  const sim = await role("sim", new URL(appUrl).port);
  const { url: simUrl, agentUrl, token, agentPid } = sim.first;
  const previewUrl = sim.first.preview!;
  const lib = await role("http-proxy", agentUrl!, token!);
  const port = new URL(appUrl).port;
  const auth = { "x-blaxel-authorization": `Bearer ${KEY}` };
  const paths: [string, (mib: number) => Promise<number>][] = [
    ["direct", (mib) => upload(`${appUrl}/upload`, mib)],
    ["/port/n", (mib) => upload(`${simUrl}/sbx/default/bench/port/${port}/upload`, mib, auth)],
    ["preview", (mib) => upload(`${previewUrl}/upload`, mib)],
    ["http-proxy", (mib) => upload(`${lib.first.url}/port/${port}/upload`, mib)],
  ];
  try {
    log(`bench:proxy  loopback, process launcher; uploads of ${sizes.join(" and ")} MiB, ${rounds} alternating rounds each (best kept); ${cpus().length} CPUs, load average ${loadavg().map((n) => fmt(n, 2)).join(" ")}`);
    for (const mib of sizes) {
      const best = new Map<string, number>();
      await paths[1]![1](Math.min(mib, 16)); // warm-up: connections, JIT
      // Each round starts with the next path, so no path always follows the same one (GC, page cache).
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < paths.length; i++) {
          const [name, run] = paths[(i + r) % paths.length]!;
          best.set(name, Math.max(best.get(name) ?? 0, await run(mib)));
        }
      }
      const direct = best.get("direct")!;
      const simRss = (await sim.ask("rss")).rss!;
      const libRss = (await lib.ask("rss")).rss!;
      const line = paths.map(([name]) => `${name} ${fmt(best.get(name)!)} MB/s`).join(" | ");
      log(`upload ${mib} MiB  ${line}`);
      log(`  ratio to direct: /port/n ${fmt(best.get("/port/n")! / direct, 2)}, preview ${fmt(best.get("preview")! / direct, 2)} (target >= 0.85) | ours vs http-proxy: /port/n ${fmt(best.get("/port/n")! / best.get("http-proxy")!, 2)}, preview ${fmt(best.get("preview")! / best.get("http-proxy")!, 2)} (target >= 1.00)`);
      log(`  peak RSS after ${mib} MiB uploads: simulator (proxy) ${fmt(simRss)} MiB | agent ${fmt(peakRssMiB(agentPid!))} MiB | http-proxy ${fmt(libRss)} MiB | app ${fmt((await app.ask("rss")).rss!)} MiB`);
    }
    log(`bench:proxy done in ${fmt((performance.now() - started) / 1000)} s`);
  } finally {
    lib.child.kill();
    app.child.kill();
    sim.child.disconnect();
    await new Promise((r) => sim.child.once("exit", r));
  }
}

if (process.argv[1] && resolve(process.argv[1]) === SELF) {
  const [flag, ...args] = process.argv.slice(2);
  const run = flag === "--app" ? serveApp() : flag === "--sim" ? serveSim(args[0]!) : flag === "--http-proxy" ? serveHttpProxy(args[0]!, args[1]!) : benchProxy();
  run.catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
