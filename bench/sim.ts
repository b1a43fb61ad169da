/**
 * bench:sim — the simulator's get, list (1,000 volumes, paginated) and
 * create at 50 concurrent clients, beside a bare node:http server (in its own
 * process, like the simulator) answering the same JSON bodies: the limit of
 * this machine's loopback and HTTP stack. Requests per second, p99 latency,
 * the ratio to the bare server, and the simulator's peak memory.
 *
 *   BENCH_SIM_CLIENTS  concurrent clients (default 50)
 *   BENCH_SIM_GETS     get requests per server (default 20000)
 *   BENCH_SIM_LISTS    list requests per server (default 5000)
 *   BENCH_SIM_CREATES  volumes created (default 1000; also the list's size)
 *   BENCH_SIM_WARMUP   unmeasured create/get/delete rounds per server first (default 300)
 *
 * Volumes, not sandboxes: since the simulator runs a real sandbox-agent per
 * sandbox, a sandbox create measures process start-up (bench:e2e);
 * a volume is a pure control-plane record with the same code path
 * (auth, validation, store, versioned paginated list). The `get sandbox` line
 * reads one real sandbox (bwrap, the host's root: no image to build) at the
 * same concurrency: the sandbox kind's read path (expiry on read, expiresIn,
 * events) that the SDK polls. The simulator runs with no warm pool and no
 * prebuild, so no sandbox starts in the background of a measure.
 *   BENCH_SIM_SANDBOX_GETS  get requests of the sandbox per server (default 20000)
 *   BENCH_SIM_NODE_ARGS extra node flags for the simulator process (e.g. "--cpu-prof")
 */
import { Agent, request } from "node:http";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { cpuTimeMs, fmt, peakRssMiB, percentile, spawnListening } from "./lib.js";

const CLIENTS = Number(process.env.BENCH_SIM_CLIENTS ?? 50);
const GETS = Number(process.env.BENCH_SIM_GETS ?? 20_000);
const LISTS = Number(process.env.BENCH_SIM_LISTS ?? 5_000);
const CREATES = Number(process.env.BENCH_SIM_CREATES ?? 1_000);
const SANDBOX_GETS = Number(process.env.BENCH_SIM_SANDBOX_GETS ?? 20_000);
const SANDBOX = "bench-sandbox";
const SIM_NODE_ARGS = (process.env.BENCH_SIM_NODE_ARGS ?? "").split(" ").filter(Boolean);
const KEY = "bench-sim-admin-key";
const HEADERS = {
  "X-Blaxel-Authorization": `Bearer ${KEY}`,
  "X-Blaxel-Workspace": "default",
  "Blaxel-Version": "2026-04-28",
  "Content-Type": "application/json",
};

interface Reply {
  status: number;
  body: string;
}

/** The one client of both servers: host/port options (no URL parsing per request), keep-alive agent. */
function call(agent: Agent, base: string, method: string, path: string, body?: string): Promise<Reply> {
  const { hostname, port } = origin(base);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, method, agent, headers: body ? { ...HEADERS, "Content-Length": Buffer.byteLength(body) } : HEADERS }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const origins = new Map<string, { hostname: string; port: number }>();
function origin(base: string): { hostname: string; port: number } {
  let o = origins.get(base);
  if (!o) {
    const url = new URL(base);
    origins.set(base, (o = { hostname: url.hostname, port: Number(url.port) }));
  }
  return o;
}

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  /** Server CPU per request (µs). */
  cpuUs: number;
  /** This process's (the load generator's) CPU per request (µs). */
  clientUs: number;
}

/** Runs `count` requests from CLIENTS concurrent loops; each request's latency is recorded. */
async function load(count: number, pid: number, one: (i: number) => Promise<Reply>): Promise<Figures> {
  const latencies: number[] = [];
  const cpuBefore = cpuTimeMs(pid);
  const clientBefore = process.cpuUsage();
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        const reply = await one(i);
        latencies.push(performance.now() - t);
        if (reply.status >= 300) throw new Error(`request ${i}: ${reply.status} ${reply.body.slice(0, 200)}`);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  // Server CPU time per request: steadier than req/s on a shared machine.
  const cpuUs = ((cpuTimeMs(pid) - cpuBefore) * 1000) / count;
  const client = process.cpuUsage(clientBefore);
  return { rps: count / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), cpuUs, clientUs: (client.user + client.system) / count };
}

/** The bare baseline: node:http answering fixed bodies by method and path shape, reading request bodies like the simulator must. */
const BARE = `
import { createServer } from "node:http";
let bodies = "";
process.stdin.on("data", (d) => (bodies += d));
process.stdin.on("end", () => {
  const { get, list, create, sandbox } = JSON.parse(bodies);
  const server = createServer((req, res) => {
    let size = 0;
    req.on("data", (d) => (size += d.length));
    req.on("end", () => {
      const body = req.method === "POST" ? create : req.url.startsWith("/v0/volumes?") ? list : req.url.startsWith("/v0/sandboxes/") ? sandbox : get;
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
      res.end(body);
    });
  });
  server.listen(0, "127.0.0.1", () => console.log("bare listening on http://127.0.0.1:" + server.address().port));
});
`;

/**
 * The same warm-up for each server before its first measured phase (and for
 * this client before the simulator's): without it the first phase (create)
 * measures both processes' JIT compilation, and only the simulator's, since
 * the bare server runs second. Creates, gets and deletes of other volumes,
 * from CLIENTS loops, so that every keep-alive connection is open before the
 * measure: with 10 loops the create phase opened 40 connections while the
 * server was saturated, and those first requests waited 20-450 ms (one new
 * connection served every ~5 ms; a bare server spending 250 µs per create
 * shows the same p99 of ~220 ms), which was the create phase's p99.
 */
const WARM_UP = Number(process.env.BENCH_SIM_WARMUP ?? 300);
async function warmUp(agent: Agent, base: string): Promise<void> {
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      for (let i = c; i < WARM_UP; i += CLIENTS) {
        const name = `warm-${i}`;
        await call(
          agent,
          base,
          "POST",
          "/v0/volumes",
          JSON.stringify({ metadata: { name, labels: { bench: "warm" } }, spec: { region: "us-pdx-1", size: 1024 } }),
        );
        await call(agent, base, "GET", `/v0/volumes/${name}`);
        await call(agent, base, "DELETE", `/v0/volumes/${name}`);
      }
    }),
  );
}

async function main(): Promise<void> {
  const loadAtStart = loadavg()
    .map((n) => fmt(n, 2))
    .join(" ");
  const simMain = fileURLToPath(new URL("../simulator/main.js", import.meta.url));
  const sim = await spawnListening([
    ...SIM_NODE_ARGS,
    simMain,
    "--port",
    "0",
    "--api-key",
    KEY,
    "--log-level",
    "warn",
    "--warm-sandboxes",
    "0",
    "--prebuild",
    "none",
    "--image-source",
    "host",
  ]);
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });
  const bodyFor = (i: number, run: string) =>
    JSON.stringify({ metadata: { name: `${run}-${i}`, labels: { bench: run } }, spec: { region: "us-pdx-1", size: 1024 } });
  try {
    await warmUp(agent, sim.url);
    const simCreate = await load(CREATES, sim.child.pid!, (i) => call(agent, sim.url, "POST", "/v0/volumes", bodyFor(i, "vol")));
    const names = Array.from({ length: CREATES }, (_, i) => `vol-${i}`);
    const simGet = await load(GETS, sim.child.pid!, (i) => call(agent, sim.url, "GET", `/v0/volumes/${names[(i * 7919) % names.length]}`));
    // Each list request fetches the page after a cursor: clients walk the 1,000 items in pages of 50.
    const pages: string[] = ["/v0/volumes?limit=50"];
    for (let cursor = ""; ;) {
      const page = JSON.parse((await call(agent, sim.url, "GET", `/v0/volumes?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)).body) as {
        meta: { nextCursor: string; total: number };
      };
      if (page.meta.total < CREATES) throw new Error(`list total ${page.meta.total} < ${CREATES}`);
      if (!page.meta.nextCursor) break;
      cursor = page.meta.nextCursor;
      pages.push(`/v0/volumes?limit=50&cursor=${encodeURIComponent(cursor)}`);
    }
    const simList = await load(LISTS, sim.child.pid!, (i) => call(agent, sim.url, "GET", pages[i % pages.length]!));
    // One real sandbox (its create answers once its agent is healthy), read by every client.
    const created = await call(agent, sim.url, "POST", "/v0/sandboxes", JSON.stringify({ metadata: { name: SANDBOX }, spec: { runtime: { memory: 2048 } } }));
    if (created.status !== 200) throw new Error(`sandbox create: ${created.status} ${created.body.slice(0, 300)}`);
    const sandboxPath = `/v0/sandboxes/${SANDBOX}`;
    const simSandbox = await load(SANDBOX_GETS, sim.child.pid!, () => call(agent, sim.url, "GET", sandboxPath));
    const simRss = peakRssMiB(sim.child.pid!);

    const samples = {
      get: (await call(agent, sim.url, "GET", `/v0/volumes/${names[0]}`)).body,
      list: (await call(agent, sim.url, "GET", pages[1] ?? pages[0]!)).body,
      create: (await call(agent, sim.url, "POST", "/v0/volumes", bodyFor(0, "sample"))).body,
      sandbox: (await call(agent, sim.url, "GET", sandboxPath)).body,
    };
    const bare = await spawnListening(["--input-type=module", "-e", BARE], JSON.stringify(samples));
    let bareCreate, bareGet, bareList, bareSandbox;
    try {
      await warmUp(agent, bare.url);
      bareCreate = await load(CREATES, bare.child.pid!, (i) => call(agent, bare.url, "POST", "/v0/volumes", bodyFor(i, "vol")));
      bareGet = await load(GETS, bare.child.pid!, (i) => call(agent, bare.url, "GET", `/v0/volumes/${names[(i * 7919) % names.length]}`));
      bareList = await load(LISTS, bare.child.pid!, (i) => call(agent, bare.url, "GET", pages[i % pages.length]!));
      bareSandbox = await load(SANDBOX_GETS, bare.child.pid!, () => call(agent, bare.url, "GET", sandboxPath));
    } finally {
      await bare.stop();
    }
    const line = (name: string, s: Figures, b: Figures) =>
      `${name.padEnd(28)} ${fmt(s.rps, 0).padStart(6)} req/s  p50 ${fmt(s.p50, 1)} ms  p99 ${fmt(s.p99, 1)} ms  ${fmt(s.cpuUs, 0)} µs CPU/req` +
      ` | bare ${fmt(b.rps, 0).padStart(6)} req/s  p99 ${fmt(b.p99, 1)} ms  ${fmt(b.cpuUs, 0)} µs CPU/req | ratio ${fmt((100 * s.rps) / b.rps, 0)}% (CPU ${fmt((100 * b.cpuUs) / s.cpuUs, 0)}%)` +
      ` | client ${fmt(s.clientUs, 0)}/${fmt(b.clientUs, 0)} µs CPU/req`;
    const loadAtEnd = loadavg()
      .map((n) => fmt(n, 2))
      .join(" ");
    console.log(
      `bench:sim — ${CLIENTS} concurrent clients, keep-alive, 127.0.0.1; simulator in memory (:memory:), ${CREATES} volumes, 1 sandbox (${Buffer.byteLength(samples.sandbox)} B); ${WARM_UP} warm-up create/get/delete rounds per server; ${cpus().length} CPUs, load average ${loadAtStart} at start, ${loadAtEnd} at end`,
    );
    console.log(line(`get    (${GETS} requests)`, simGet, bareGet));
    console.log(line(`get sandbox (${SANDBOX_GETS} requests)`, simSandbox, bareSandbox));
    console.log(line(`list   (${LISTS} pages of 50)`, simList, bareList));
    console.log(line(`create (${CREATES} volumes)`, simCreate, bareCreate));
    console.log(
      `simulator peak RSS ${fmt(simRss, 0)} MiB; targets: get and get sandbox >= 50% of bare, p99 <= 10 ms; "CPU" = bare's CPU per request over the simulator's; "client" = this load generator's CPU per request (simulator/bare)`,
    );
    // Closed loop: CLIENTS requests are always in flight, so the mean latency is CLIENTS / throughput (Little's law).
    console.log(
      `closed loop of ${CLIENTS}: mean latency = ${CLIENTS} / req/s, e.g. ${fmt((1000 * CLIENTS) / bareGet.rps, 1)} ms for the bare get; p99 <= 10 ms needs >= ${fmt((1000 * CLIENTS) / 10, 0)} req/s with no tail`,
    );
  } finally {
    agent.destroy();
    await sim.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`bench:sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
