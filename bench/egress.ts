import { serveSimulator } from "../simulator/serve.js";
import { probeIsolation } from "../simulator/launcher/isolation.js";
import { fmt, peakRssMiB } from "./lib.js";

/**
 * The egress line of bench:proxy: a client in sandbox B (Node, keep-alive)
 * against a server in sandbox A behind a public preview, by three paths:
 * straight (the preview's URL, through the gateway, no policy work), plain
 * HTTP through HTTP_PROXY, and HTTPS through CONNECT with the proxy's TLS
 * interception, both with a policy and a header-injecting routing rule.
 * Requests per second (small responses, sequential) and MB/s (one large
 * response), with the simulator's (the proxy's) peak RSS and its CPU time
 * per request and per MB. The three paths run in turn, ROUNDS times, and the
 * median of each is shown: on a shared 2-core machine one run of each swings
 * by a factor of two. Each round starts with the next path (no path is always
 * the first, or always the one after a given path's large response), and a
 * ratio is the median of the rounds' own ratios, each taken between runs a few
 * seconds apart: the machine's load drifts less within a round than across
 * the rounds. Bounded: BENCH_EGRESS_REQUESTS (default 300),
 * BENCH_EGRESS_MB (default 64), BENCH_EGRESS_ROUNDS (default 3).
 */

const REQUESTS = Number(process.env.BENCH_EGRESS_REQUESTS ?? 300);
const MIB = Number(process.env.BENCH_EGRESS_MB ?? 64);
const ROUNDS = Math.max(1, Number(process.env.BENCH_EGRESS_ROUNDS ?? 3));

const SERVER = String.raw`
require("node:http").createServer((req, res) => {
  const n = Number(new URL(req.url, "http://x").searchParams.get("n")) || 1;
  res.writeHead(200, { "content-length": n });
  res.end(Buffer.alloc(n, 120));
}).listen(4000, "127.0.0.1");
`;

/** argv: mode (straight|http|https), url, requests, bytes. Prints {rps, mbps}. */
const CLIENT = String.raw`
const http = require("node:http"), https = require("node:https"), tls = require("node:tls");
const [mode, target, requests, bytes] = process.argv.slice(2);
const t = new URL(target), p = new URL(process.env.HTTP_PROXY);
let agent;
if (mode === "https") {
  agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  agent.createConnection = (opts, done) => {
    http.request({ host: p.hostname, port: p.port, method: "CONNECT", path: t.hostname + ":443" }).on("connect", (res, socket) => {
      done(null, tls.connect({ socket, servername: t.hostname }));
    }).on("error", done).end();
  };
} else agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const get = (n) => new Promise((resolve, reject) => {
  const path = t.pathname.replace(/\/$/, "") + "/?n=" + n;
  const opts = mode === "https" ? { host: t.hostname, servername: t.hostname, path, agent }
    : mode === "http" ? { host: p.hostname, port: p.port, path: "http://" + t.host + path, agent }
    : { host: t.hostname, port: t.port, path, agent };
  (mode === "https" ? https : http).get(opts, (r) => { let got = 0; r.on("data", (c) => (got += c.length)); r.on("end", () => (r.statusCode === 200 && got === n ? resolve() : reject(new Error(r.statusCode + " " + got)))); }).on("error", reject);
});
(async () => {
  await get(1);
  let t0 = performance.now();
  for (let i = 0; i < Number(requests); i++) await get(1);
  const rps = Number(requests) / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  await get(Number(bytes));
  const mbps = Number(bytes) / 1e6 / ((performance.now() - t0) / 1000);
  console.log(JSON.stringify({ rps, mbps }));
  process.exit(0);
})().catch((e) => { console.error(e.message); process.exit(1); });
`;

interface Measured {
  rps: number;
  mbps: number;
  msPerRequest: number;
  msPerMB: number;
}

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Each figure's median over the rounds. */
function medians(rounds: Measured[]): Measured {
  return {
    rps: median(rounds.map((r) => r.rps)),
    mbps: median(rounds.map((r) => r.mbps)),
    msPerRequest: median(rounds.map((r) => r.msPerRequest)),
    msPerMB: median(rounds.map((r) => r.msPerMB)),
  };
}

export async function benchEgress(log: (line: string) => void = console.log): Promise<void> {
  if (!probeIsolation().tools) return log("egress  skipped: no isolating launcher here (bwrap, user namespaces)");
  const sim = await serveSimulator({
    port: 0,
    imageSource: "host",
    apiKey: "bench-egress-admin-key",
    workspace: "bench",
    logLevel: "silent",
    previewUrls: "host",
  });
  try {
    Object.assign(process.env, sim.env); // @blaxel/core reads its settings from the environment when loaded
    const { SandboxInstance } = await import("@blaxel/core");
    const a = await SandboxInstance.create({ name: "egress-server" });
    await a.fs.write("/app/server.js", SERVER);
    await a.process.exec({ name: "server", command: "node /app/server.js" });
    const preview = await a.previews.create({ metadata: { name: "bench" }, spec: { port: 4000, public: true } });
    const host = new URL(preview.spec.url!).hostname;
    const b = await SandboxInstance.create({
      name: "egress-client",
      network: {
        forbiddenDomains: ["blocked.example.com"],
        proxy: { routing: [{ destinations: [host], headers: { "x-bench": "{{SECRET:k}}" }, secrets: { k: "v" } }] },
      },
    });
    await b.fs.write("/app/client.js", CLIENT);
    /** One client run; `cpuMs` is the simulator's (the proxy's) CPU time meanwhile. */
    const run = async (mode: string, url: string, requests: number, bytes: number) => {
      const before = process.cpuUsage();
      const r = await b.process.exec({ command: `node /app/client.js ${mode} ${url} ${requests} ${bytes}`, waitForCompletion: true, timeout: 300 });
      const cpu = process.cpuUsage(before);
      if (r.exitCode !== 0) throw new Error(`egress ${mode}: ${r.logs}`);
      return { ...(JSON.parse(r.logs!.trim().split("\n").pop()!) as { rps: number; mbps: number }), cpuMs: (cpu.user + cpu.system) / 1000 };
    };
    /** The requests and the large response in two runs, so each one's CPU is its own. */
    const measure = async (mode: string, url: string) => {
      const small = await run(mode, url, REQUESTS, 1);
      const large = await run(mode, url, 0, MIB * 1024 * 1024);
      return { rps: small.rps, mbps: large.mbps, msPerRequest: small.cpuMs / REQUESTS, msPerMB: large.cpuMs / (MIB * 1.048576) };
    };
    // Straight: the preview by the path a program inside would use without a proxy (the gateway; Host = the preview's name).
    const paths: [string, string][] = [
      ["straight", `http://127.0.0.1:${new URL(sim.url).port}/bench/sandboxes/egress-server/previews/bench`],
      ["http", preview.spec.url!],
      ["https", `https://${host}`],
    ];
    for (const [mode, url] of paths) await run(mode, url, 50, 4 * 1024 * 1024); // warm-up: JIT of the simulator's paths, the host's certificate
    const rounds: Measured[][] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const round: Measured[] = [];
      for (let k = 0; k < paths.length; k++) {
        const at = (i + k) % paths.length;
        round[at] = await measure(...paths[at]!);
      }
      rounds.push(round);
    }
    const [straight, plain, tls] = [medians(rounds.map((r) => r[0]!)), medians(rounds.map((r) => r[1]!)), medians(rounds.map((r) => r[2]!))];
    /** A path's figure over straight's in the same round, the median of the rounds. */
    const ratio = (path: number, figure: "rps" | "mbps") => median(rounds.map((r) => r[path]![figure] / r[0]![figure]));
    log(
      `egress  ${REQUESTS} sequential requests and one ${MIB} MiB response, Node keep-alive client in one sandbox, server in another behind a public preview; median of ${ROUNDS} rounds, each starting with the next path`,
    );
    log(
      `  straight (no proxy) ${fmt(straight.rps)} req/s ${fmt(straight.mbps)} MB/s | HTTP_PROXY ${fmt(plain.rps)} req/s ${fmt(plain.mbps)} MB/s | HTTPS via CONNECT, intercepted ${fmt(tls.rps)} req/s ${fmt(tls.mbps)} MB/s`,
    );
    log(
      `  ratio to straight (median of the rounds' ratios): http ${fmt(ratio(1, "rps"), 2)} req/s, ${fmt(ratio(1, "mbps"), 2)} MB/s (target >= 0.85) | https ${fmt(ratio(2, "rps"), 2)} req/s, ${fmt(ratio(2, "mbps"), 2)} MB/s (target >= 0.7) | simulator (proxy) peak RSS ${fmt(peakRssMiB(process.pid))} MiB`,
    );
    log(
      `  simulator CPU: straight ${fmt(straight.msPerRequest, 2)} ms/request ${fmt(straight.msPerMB, 2)} ms/MB | http ${fmt(plain.msPerRequest, 2)} ms/request ${fmt(plain.msPerMB, 2)} ms/MB | https ${fmt(tls.msPerRequest, 2)} ms/request ${fmt(tls.msPerMB, 2)} ms/MB`,
    );
  } finally {
    await sim.stop();
  }
}
