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
 * response), with the simulator's (the proxy's) peak RSS. Bounded:
 * BENCH_EGRESS_REQUESTS (default 300), BENCH_EGRESS_MB (default 64).
 */

const REQUESTS = Number(process.env.BENCH_EGRESS_REQUESTS ?? 300);
const MIB = Number(process.env.BENCH_EGRESS_MB ?? 64);

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

export async function benchEgress(log: (line: string) => void = console.log): Promise<void> {
  if (!probeIsolation().tools) return log("egress  skipped: no isolating launcher here (bwrap, user namespaces)");
  const sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: "bench-egress-admin-key", workspace: "bench", logLevel: "silent", previewUrls: "host" });
  try {
    Object.assign(process.env, sim.env); // @blaxel/core reads its settings from the environment when loaded
    const { SandboxInstance } = await import("@blaxel/core");
    const a = await SandboxInstance.create({ name: "egress-server" });
    await a.fs.write("/app/server.js", SERVER);
    await a.process.exec({ name: "server", command: "node /app/server.js" });
    const preview = await a.previews.create({ metadata: { name: "bench" }, spec: { port: 4000, public: true } });
    const host = new URL(preview.spec.url!).hostname;
    const b = await SandboxInstance.create({ name: "egress-client", network: { forbiddenDomains: ["blocked.example.com"], proxy: { routing: [{ destinations: [host], headers: { "x-bench": "{{SECRET:k}}" }, secrets: { k: "v" } }] } } });
    await b.fs.write("/app/client.js", CLIENT);
    const run = async (mode: string, url: string, requests = REQUESTS, mib = MIB) => {
      const r = await b.process.exec({ command: `node /app/client.js ${mode} ${url} ${requests} ${mib * 1024 * 1024}`, waitForCompletion: true, timeout: 300 });
      if (r.exitCode !== 0) throw new Error(`egress ${mode}: ${r.logs}`);
      return JSON.parse(r.logs!.trim().split("\n").pop()!) as { rps: number; mbps: number };
    };
    // Straight: the preview by the path a program inside would use without a proxy (the gateway; Host = the preview's name).
    const paths: [string, string][] = [["straight", `http://127.0.0.1:${new URL(sim.url).port}/bench/sandboxes/egress-server/previews/bench`], ["http", preview.spec.url!], ["https", `https://${host}`]];
    for (const [mode, url] of paths) await run(mode, url, 50, 4); // warm-up: JIT of the simulator's paths, the host's certificate
    const [straight, plain, tls] = [await run(...paths[0]!), await run(...paths[1]!), await run(...paths[2]!)];
    log(`egress  ${REQUESTS} sequential requests and one ${MIB} MiB response, Node keep-alive client in one sandbox, server in another behind a public preview`);
    log(`  straight (no proxy) ${fmt(straight.rps)} req/s ${fmt(straight.mbps)} MB/s | HTTP_PROXY ${fmt(plain.rps)} req/s ${fmt(plain.mbps)} MB/s | HTTPS via CONNECT, intercepted ${fmt(tls.rps)} req/s ${fmt(tls.mbps)} MB/s`);
    log(`  ratio to straight: http ${fmt(plain.rps / straight.rps, 2)} req/s, ${fmt(plain.mbps / straight.mbps, 2)} MB/s (target >= 0.85) | https ${fmt(tls.rps / straight.rps, 2)} req/s, ${fmt(tls.mbps / straight.mbps, 2)} MB/s (target >= 0.7) | simulator (proxy) peak RSS ${fmt(peakRssMiB(process.pid))} MiB`);
  } finally {
    await sim.stop();
  }
}
