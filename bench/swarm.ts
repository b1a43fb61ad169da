/**
 * bench:swarm (also `npm run bench:e2e -- --launcher swarm`) — what the orchestrator costs: the simulator with
 * the swarm launcher beside the same simulator with the docker launcher, same machine, same image, in this run:
 *   create-to-ready   POST /v0/sandboxes until it answers (the agent healthy), median over the sandboxes;
 *   /port/n upload    a PUT through the simulator's proxy to a sink server in the sandbox (the agent's /port/{n}
 *                     in both: neither launcher hands the proxy a socket), best of the rounds;
 *   egress request    from inside the sandbox, GET of the simulator's /health by its own URL on a new connection
 *                     each time (docker: the agent's relay to the sandbox's listener; swarm: a tunnel the
 *                     simulator opened to the agent), median of BENCH_SWARM_EGRESS sequential requests;
 * as ratios swarm / docker, with this process's peak RSS. Needs a Docker daemon (a single-node swarm is made
 * with `docker swarm init --advertise-addr 127.0.0.1` when the daemon is in none, and left afterwards) and an
 * image with a glibc the host's node runs on (BENCH_SWARM_IMAGE, default the tests' local
 * sandbox-kit-test/node20:bookworm; no registry is reachable here).
 *
 *   BENCH_SWARM_SANDBOXES  creates per launcher (default 5)
 *   BENCH_SWARM_UPLOAD_MB  size of each upload (default 64)
 *   BENCH_SWARM_ROUNDS     upload rounds per launcher (default 2)
 *   BENCH_SWARM_EGRESS     egress requests per launcher (default 50)
 * `npm run bench:swarm -- --cluster`: on a three-node cluster of this machine beside bwrap instead (swarm-cluster.ts).
 */
import { execFileSync } from "node:child_process";
import { request } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { serveSimulator } from "../simulator/serve.js";
import { dockerUnavailable } from "../simulator/launcher/docker.js";
import { DockerLauncher, SwarmLauncher, type Launcher } from "../simulator/launcher/index.js";
import { fmt, peakRssMiB, percentile } from "./lib.js";
import { benchCluster } from "./swarm-cluster.js";

const MiB = 1024 * 1024;
const sandboxes = Number(process.env.BENCH_SWARM_SANDBOXES ?? 5);
const uploadMiB = Number(process.env.BENCH_SWARM_UPLOAD_MB ?? 64);
const rounds = Number(process.env.BENCH_SWARM_ROUNDS ?? 2);
const egressRequests = Number(process.env.BENCH_SWARM_EGRESS ?? 50);
const image = process.env.BENCH_SWARM_IMAGE ?? "sandbox-kit-test/node20:bookworm";
const KEY = "bench-swarm-admin-key";
const WS = "benchswarm";
const SINK_PORT = 3000;
const SINK = `require("node:http").createServer((q, s) => { let n = 0; q.on("data", (d) => (n += d.length)); q.on("end", () => s.end(String(n))); }).listen(${SINK_PORT}, "127.0.0.1")`;

interface Measured {
  createMs: number[];
  uploadMBs: number;
  egressMs: number;
}

/** Sequential GETs of argv[1], each on a new connection; prints the sorted times (ms) as JSON. */
const EGRESS_CLIENT = `const http = require("node:http"); const t = []; (async () => { for (let i = 0; i < ${egressRequests}; i++) { const s = performance.now(); await new Promise((ok, ko) => http.get(process.argv[1], { agent: false }, (r) => { r.resume(); r.on("end", ok); }).on("error", ko)); t.push(performance.now() - s); } console.log(JSON.stringify(t.sort((a, b) => a - b))); })()`;

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

function upload(url: string): Promise<number> {
  const started = performance.now();
  const chunk = Buffer.alloc(MiB, 7);
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "PUT", headers: { "x-blaxel-authorization": `Bearer ${KEY}`, "content-type": "application/octet-stream" } }, (res) => {
      let text = "";
      res
        .setEncoding("utf8")
        .on("data", (d: string) => (text += d))
        .on("end", () => {
          if (res.statusCode !== 200 || Number(text) !== uploadMiB * MiB) return reject(new Error(`PUT ${url}: ${res.statusCode} ${text.slice(0, 200)}`));
          resolve((uploadMiB * MiB) / 1e6 / ((performance.now() - started) / 1000));
        });
    });
    req.on("error", reject);
    pipeline(
      Readable.from(
        (function* () {
          for (let i = 0; i < uploadMiB; i++) yield chunk;
        })(),
      ),
      req,
    ).catch(reject);
  });
}

async function measure(launcher: Launcher): Promise<Measured> {
  const sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageSource: "host" }, { launcher });
  try {
    const createMs: number[] = [];
    for (let i = 0; i < sandboxes; i++) {
      const started = performance.now();
      const created = await call(sim.url, "POST", "/v0/sandboxes", { metadata: { name: `b-${i}` }, spec: { runtime: { image } } });
      if (created.status !== 200) throw new Error(`create with ${launcher.name}: ${created.status} ${created.text.slice(0, 300)}`);
      createMs.push(performance.now() - started);
      if (i > 0) await call(sim.url, "DELETE", `/v0/sandboxes/b-${i}`);
    }
    await call(sim.url, "POST", `/sbx/${WS}/b-0/process`, { command: `node -e '${SINK}'`, waitForCompletion: false });
    for (let tries = 0; ; tries++) {
      const probe = await call(sim.url, "GET", `/sbx/${WS}/b-0/port/${SINK_PORT}/`);
      if (probe.status === 200) break;
      if (tries > 200) throw new Error(`the sink server did not start: ${probe.status} ${probe.text.slice(0, 200)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    let uploadMBs = 0;
    for (let r = 0; r < rounds; r++) uploadMBs = Math.max(uploadMBs, await upload(`${sim.url}/sbx/${WS}/b-0/port/${SINK_PORT}/upload`));
    const egress = await call(sim.url, "POST", `/sbx/${WS}/b-0/process`, { command: `node -e '${EGRESS_CLIENT}' ${sim.url}/health`, waitForCompletion: true });
    const egressTimes = JSON.parse((JSON.parse(egress.text) as { stdout?: string }).stdout || "null") as number[] | null;
    if (!egressTimes) throw new Error(`egress requests with ${launcher.name}: ${egress.text.slice(0, 300)}`);
    await call(sim.url, "DELETE", "/v0/sandboxes/b-0");
    return { createMs: createMs.sort((a, b) => a - b), uploadMBs, egressMs: percentile(egressTimes, 50) };
  } finally {
    await sim.stop();
  }
}

export async function benchSwarm(log: (line: string) => void = console.log): Promise<void> {
  const unavailable = await dockerUnavailable();
  if (unavailable) return log(`bench:swarm  skipped: ${unavailable}`);
  try {
    execFileSync("docker", ["image", "inspect", image], { stdio: "ignore" });
  } catch {
    return log(`bench:swarm  skipped: image ${image} is not in the daemon (run the docker tests once to build it, or set BENCH_SWARM_IMAGE)`);
  }
  const state = execFileSync("docker", ["info", "--format", "{{.Swarm.LocalNodeState}}"], { encoding: "utf8" }).trim();
  const initialised = state !== "active";
  if (initialised) execFileSync("docker", ["swarm", "init", "--advertise-addr", "127.0.0.1"], { stdio: "ignore" });
  try {
    const docker = await measure(new DockerLauncher({ image }));
    const swarm = await measure(new SwarmLauncher({ image }));
    const median = (m: Measured) => percentile(m.createMs, 50);
    log(`bench:swarm  ${sandboxes} sandboxes per launcher, image ${image}, ${rounds} uploads of ${uploadMiB} MiB through /port/${SINK_PORT}`);
    log(
      `create-to-ready  swarm median ${fmt(median(swarm))} ms (max ${fmt(swarm.createMs.at(-1)!)}) | docker median ${fmt(median(docker))} ms (max ${fmt(docker.createMs.at(-1)!)}) | ratio ${fmt(median(swarm) / median(docker), 2)}`,
    );
    log(`/port/n upload   swarm ${fmt(swarm.uploadMBs)} MB/s | docker ${fmt(docker.uploadMBs)} MB/s | ratio ${fmt(swarm.uploadMBs / docker.uploadMBs, 2)}`);
    log(
      `egress request   swarm median ${fmt(swarm.egressMs, 2)} ms | docker median ${fmt(docker.egressMs, 2)} ms | ratio ${fmt(swarm.egressMs / docker.egressMs, 2)} (${egressRequests} each, a new connection each)`,
    );
    log(`memory           bench process (simulator in it) peak RSS ${fmt(peakRssMiB(process.pid))} MiB`);
  } finally {
    if (initialised) execFileSync("docker", ["swarm", "leave", "--force"], { stdio: "ignore" });
  }
}

if (process.argv[1]?.endsWith("swarm.js")) {
  (process.argv.includes("--cluster") ? benchCluster() : benchSwarm()).catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
