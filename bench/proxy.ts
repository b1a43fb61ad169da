/**
 * bench:proxy — uploads to a server inside a sandbox by every path a program
 * has to it, measured alternately in this run, under the simulator's default
 * isolating launcher where it can run (else the process launcher;
 * BENCH_PROXY_LAUNCHER=bwrap|process chooses):
 *   direct      from inside the sandbox to the server: no proxy (the baseline);
 *   /port/n     the sandbox URL's /port/{n} from the host: the simulator's proxy, then the
 *               server itself over a connection the launcher opened (AgentHandle.openPort);
 *   preview     a public preview's URL: the same way;
 *   http-proxy  the well-known Node proxy library in the simulator's place, the way it has to the
 *               server: under bwrap the agent's /port/{n} (the sandbox's network is not the host's;
 *               with the sandbox's token), under the process launcher the server itself (one hop, like ours);
 *   tcp relay   from inside the sandbox through a raw TCP relay (Node, no HTTP) beside the app:
 *               what one more process copying the bytes costs at least, the floor of any proxy;
 * each upload by a fresh client process (bench/proxy-roles.js), at two sizes,
 * with each process's peak RSS after each size: the proxy's memory must not
 * grow with the upload.
 *
 *   BENCH_PROXY_SMALL_MB  first size (default 64)
 *   BENCH_PROXY_LARGE_MB  second size (default 512)
 *   BENCH_PROXY_ROUNDS    rounds per size, best of each path kept (default 2)
 *   BENCH_EGRESS=0        without the egress line (bench/egress.ts)
 *   BENCH_UPLOADS=0       the egress line only
 */
import { execFile, fork, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { cpus, loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import httpProxy from "http-proxy";
import { benchEgress } from "./egress.js";
import { serveSimulator } from "../simulator/serve.js";
import type { AgentEndpoint } from "../simulator/launcher/endpoint.js";
import { probeIsolation } from "../simulator/launcher/isolation.js";
import { cmdlineOf, descendantsOf } from "../simulator/launcher/proc.js";
import { KIT } from "../simulator/launcher/sandbox-kit.js";
import { cpuTimeMs, fmt, peakRssMiB } from "./lib.js";

const sizes = [Number(process.env.BENCH_PROXY_SMALL_MB ?? 64), Number(process.env.BENCH_PROXY_LARGE_MB ?? 512)];
const rounds = Number(process.env.BENCH_PROXY_ROUNDS ?? 2);
const KEY = "bench-proxy-admin-key";
const SELF = fileURLToPath(import.meta.url);
const ROLES = join(dirname(SELF), "proxy-roles.js");
/** The in-sandbox servers' ports: the sandbox's own network under bwrap; free host ports under the process launcher. */
const BWRAP_PORTS: [number, number] = [3000, 3001];

type Reply = { url?: string; agent?: AgentEndpoint; agentPid?: number; token?: string; preview?: string; rss?: number };

/** A child process of this script in one role; answers any message with its peak RSS. */
function role(name: string, ...args: string[]): Promise<{ child: ChildProcess; first: Reply; ask(m: unknown): Promise<Reply> }> {
  const child = fork(SELF, [`--${name}`, ...args], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const next = () =>
    new Promise<Reply>((resolve, reject) => {
      child.once("message", (m) => resolve(m as Reply));
      child.once("exit", (code, signal) => reject(new Error(`${name} process exited with ${signal ?? code}`)));
    });
  return next().then((first) => ({
    child,
    first,
    ask: (m: unknown) => {
      const r = next();
      child.send(m as object);
      return r;
    },
  }));
}

function answerRss(): void {
  process.on("message", () => process.send!({ rss: peakRssMiB(process.pid) }));
}

async function freeHostPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** The simulator with one sandbox, its app server started through the agent's process API, and a public preview of the app's port. */
async function serveSim(launcher: string, appPort: number, relayPort: number): Promise<void> {
  const sim = await serveSimulator({ port: 0, apiKey: KEY, logLevel: "silent", imageSource: "host", sandboxNetwork: "none" }, { launcher });
  const headers = { "x-blaxel-authorization": `Bearer ${KEY}`, "x-blaxel-workspace": "default", "content-type": "application/json" };
  const call = async (path: string, body: unknown) => {
    const res = await fetch(`${sim.url}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ spec: { url: string } }>;
  };
  await call("/v0/sandboxes", { metadata: { name: "bench" } });
  const preview = await call("/v0/sandboxes/bench/previews", { metadata: { name: "app" }, spec: { port: appPort, public: true } });
  // `node` inside the sandbox is the host's (--image-source host); the roles script is the package's, bound at KIT.
  const roles = launcher === "bwrap" ? `${KIT}/dist/bench/proxy-roles.js` : ROLES;
  await call("/sbx/default/bench/process", { name: "app", command: `node ${roles} app ${appPort}` });
  await call("/sbx/default/bench/process", { name: "relay", command: `node ${roles} relay ${relayPort} ${appPort}` });
  // Ready once both answer through /port/n (the agent's waitForPorts counts no loopback-only server).
  for (const port of [appPort, relayPort]) {
    for (
      let tries = 0;
      (await fetch(`${sim.url}/sbx/default/bench/port/${port}/`, { headers }).then(
        (r) => r.status,
        () => 0,
      )) !== 200;
      tries++
    ) {
      if (tries > 400) throw new Error(`the in-sandbox server on port ${port} did not start`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  const { token, url, socketPath } = await sim.agents.upstream({ workspace: "default", sandbox: "bench", path: "/" });
  // The launcher's pid for the sandbox: the agent itself, or the isolating wrapper it runs under.
  const agentPid = sim.agents.get("default", "bench")!.pid;
  process.send!({ url: sim.url, agent: { url, socketPath }, agentPid, token, preview: preview.spec.url });
  answerRss();
  process.on("disconnect", () => {
    // The process launcher's sandbox processes outlive its agent (no PID namespace): end them first.
    const kill = (name: string) => fetch(`${sim.url}/sbx/default/bench/process/${name}/kill`, { method: "DELETE", headers }).catch(() => {});
    void Promise.all([kill("app"), kill("relay")])
      .then(() => sim.stop())
      .then(() => process.exit(0));
  });
}

/** http-proxy in the simulator's place, in front of `target` (the agent, or the server itself), adding `headers` (the sandbox's token for the agent). */
async function serveHttpProxy(target: AgentEndpoint, headers: Record<string, string>): Promise<void> {
  const to = target.socketPath ? ({ socketPath: target.socketPath } as unknown as string) : target.url;
  const proxy = httpProxy.createProxyServer({ target: to, headers });
  proxy.on("error", (_err, _req, res) => (res as { destroy(): void }).destroy());
  const server = createServer((req, res) => proxy.web(req, res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  process.send!({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  answerRss();
}

/** What an upload's client reports: MB/s, and its own CPU time during the upload. */
type Uploaded = { mbps: number; cpuMs: number };

/** One upload by a fresh client process on the host. */
function uploadFromHost(url: string, mib: number, headers: Record<string, string> = {}): Promise<Uploaded> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [ROLES, "upload", url, String(mib), JSON.stringify(headers)], (err, stdout, stderr) => {
      if (err) return reject(new Error(`upload to ${url}: ${stderr || err.message}`));
      resolve(JSON.parse(stdout) as Uploaded);
    });
  });
}

/** One upload by a fresh client process inside the sandbox, to a server on the sandbox's own loopback. */
async function uploadInside(simUrl: string, roles: string, port: number, mib: number): Promise<Uploaded> {
  const res = await fetch(`${simUrl}/sbx/default/bench/process`, {
    method: "POST",
    headers: { "x-blaxel-authorization": `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ command: `node ${roles} upload http://127.0.0.1:${port}/upload ${mib}`, waitForCompletion: true }),
  });
  const ran = (await res.json()) as { exitCode?: number; stdout?: string; stderr?: string };
  if (!res.ok || ran.exitCode !== 0) throw new Error(`upload inside the sandbox: ${res.status} ${ran.stderr ?? JSON.stringify(ran)}`);
  return JSON.parse(ran.stdout!) as Uploaded;
}

/** The deepest descendant of `root` whose command line has one of `words` (the node process, not the wrappers that exec'd it). */
function descendantWith(root: number, ...words: string[]): number | undefined {
  return descendantsOf(root)
    .filter((p) => {
      const line = cmdlineOf(p).join(" ");
      return words.some((w) => line.includes(w));
    })
    .pop();
}

const rssOf = (pid: number | undefined) => (pid ? fmt(peakRssMiB(pid)) : "?");

/** The whole bench; bench:e2e may call it too (the roles run as child processes of this file either way). */
export async function benchProxy(log: (line: string) => void = console.log): Promise<void> {
  const started = performance.now();
  const launcher = process.env.BENCH_PROXY_LAUNCHER ?? (probeIsolation().tools ? "bwrap" : "process");
  const [appPort, relayPort] = launcher === "bwrap" ? BWRAP_PORTS : [await freeHostPort(), await freeHostPort()];
  const sim = await role("sim", launcher, String(appPort), String(relayPort));
  const { url: simUrl, agent, token, preview } = sim.first;
  // Where http-proxy can reach the server from the host: only through the agent when the sandbox has its own network.
  const libTarget =
    launcher === "bwrap"
      ? { endpoint: agent!, headers: { "x-blaxel-authorization": `Bearer ${token}` }, prefix: `/port/${appPort}` }
      : { endpoint: { url: `http://127.0.0.1:${appPort}` }, headers: {}, prefix: "" };
  const lib = await role("http-proxy", JSON.stringify(libTarget.endpoint), JSON.stringify(libTarget.headers));
  const rolesInside = launcher === "bwrap" ? `${KIT}/dist/bench/proxy-roles.js` : ROLES;
  const auth = { "x-blaxel-authorization": `Bearer ${KEY}` };
  const paths: [string, (mib: number) => Promise<Uploaded>][] = [
    ["direct", (mib) => uploadInside(simUrl!, rolesInside, appPort, mib)],
    ["/port/n", (mib) => uploadFromHost(`${simUrl}/sbx/default/bench/port/${appPort}/upload`, mib, auth)],
    ["preview", (mib) => uploadFromHost(`${preview}/upload`, mib)],
    ["http-proxy", (mib) => uploadFromHost(`${lib.first.url}${libTarget.prefix}/upload`, mib)],
    ["tcp relay", (mib) => uploadInside(simUrl!, rolesInside, relayPort, mib)],
  ];
  try {
    log(
      `bench:proxy  loopback, ${launcher} launcher (http-proxy ${launcher === "bwrap" ? "through the agent's /port/n" : "straight to the server"}); uploads of ${sizes.join(" and ")} MiB by a fresh client process each, ${rounds} alternating rounds per size (best kept); ${cpus().length} CPUs, load average ${loadavg()
        .map((n) => fmt(n, 2))
        .join(" ")}`,
    );
    for (const [, run] of paths) await run(Math.min(sizes[0]!, 16)); // warm-up: JIT of every server on the way
    const agentPid = descendantWith(sim.first.agentPid!, "sandbox-agent/main.js", "warm-agent.js") ?? sim.first.agentPid!;
    const pids: Record<string, number> = { simulator: sim.child.pid!, agent: agentPid, "http-proxy": lib.child.pid! };
    const app = descendantWith(agentPid, "proxy-roles.js app");
    const relay = descendantWith(agentPid, "proxy-roles.js relay");
    if (app) pids.app = app;
    if (relay) pids.relay = relay;
    /** CPU time per MiB of every process on the way, client and app included: under contention a steadier figure than MB/s. */
    const cpuNow = () => Object.entries(pids).map(([name, pid]) => [name, cpuTimeMs(pid)] as const);
    for (const mib of sizes) {
      const best = new Map<string, number>();
      const cpu = new Map<string, Map<string, number>>();
      // Each round starts with the next path, so no path always follows the same one (GC, page cache).
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < paths.length; i++) {
          const [name, run] = paths[(i + r) % paths.length]!;
          const before = cpuNow();
          const uploaded = await run(mib);
          best.set(name, Math.max(best.get(name) ?? 0, uploaded.mbps));
          const spent = cpu.get(name) ?? new Map<string, number>([["client", 0]]);
          spent.set("client", spent.get("client")! + uploaded.cpuMs / mib / rounds);
          cpuNow().forEach(([proc, ms], k) => spent.set(proc, (spent.get(proc) ?? 0) + (ms - before[k]![1]) / mib / rounds));
          cpu.set(name, spent);
        }
      }
      const direct = best.get("direct")!;
      const simRss = (await sim.ask("rss")).rss!;
      const libRss = (await lib.ask("rss")).rss!;
      const line = paths.map(([name]) => `${name} ${fmt(best.get(name)!)} MB/s`).join(" | ");
      log(`upload ${mib} MiB  ${line}`);
      log(
        `  ratio to direct: /port/n ${fmt(best.get("/port/n")! / direct, 2)}, preview ${fmt(best.get("preview")! / direct, 2)} (target >= 0.85; a raw tcp relay's ${fmt(best.get("tcp relay")! / direct, 2)}) | ours vs http-proxy: /port/n ${fmt(best.get("/port/n")! / best.get("http-proxy")!, 2)}, preview ${fmt(best.get("preview")! / best.get("http-proxy")!, 2)} (target >= 1.00)`,
      );
      // /proc counts CPU in 10 ms ticks: a process under two ticks for the path's uploads is left out (idle, not on the way).
      const noise = 20 / (mib * rounds);
      const onTheWay = (name: string) =>
        [...cpu.get(name)!]
          .filter(([, ms]) => ms >= noise)
          .map(([proc, ms]) => `${proc} ${fmt(ms, 2)}`)
          .join(" + ") || "none";
      log(`  cpu ms per MiB: ${paths.map(([name]) => `${name}: ${onTheWay(name)}`).join(" | ")}`);
      log(
        `  peak RSS after ${mib} MiB uploads: simulator (proxy) ${fmt(simRss)} MiB | agent ${rssOf(pids.agent)} MiB | http-proxy ${fmt(libRss)} MiB | app ${rssOf(app)} MiB`,
      );
    }
    if (process.env.BENCH_EGRESS !== "0") await benchEgress(log);
    log(`bench:proxy done in ${fmt((performance.now() - started) / 1000)} s`);
  } finally {
    lib.child.kill();
    // A simulator that already exited must not hide the error that ended the run.
    if (sim.child.connected) {
      sim.child.disconnect();
      await new Promise((r) => sim.child.once("exit", r));
    }
  }
}

if (process.argv[1] && resolve(process.argv[1]) === SELF) {
  const [flag, ...args] = process.argv.slice(2);
  const run =
    flag === "--sim"
      ? serveSim(args[0]!, Number(args[1]), Number(args[2]))
      : flag === "--http-proxy"
        ? serveHttpProxy(JSON.parse(args[0]!) as AgentEndpoint, JSON.parse(args[1]!) as Record<string, string>)
        : process.env.BENCH_UPLOADS === "0"
          ? benchEgress()
          : benchProxy();
  run.catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
