/**
 * bench:swarm -- --cluster — the swarm launcher on a three-node cluster of this machine (`npm run cluster`,
 * simulator/cluster) beside the bwrap launcher, both measured in this run:
 *   create-to-ready   POST /v0/sandboxes until it answers (the agent healthy), median over sequential creates;
 *   TTI               create, then the first command's answer (echo), median;
 *   orchestrator      per create, the swarm's median minus bwrap's (service, placement, the node's engine,
 *                     the image from the registry, the published port), and the ratio;
 *   burst             BENCH_SWARM_BURST creates at once (default 50): how many became DEPLOYED, the wall time,
 *                     and how many each node ran;
 * with this process's peak RSS. The cluster is made for the run and removed after it (the node image is cached).
 *
 *   BENCH_SWARM_SANDBOXES  sequential creates per launcher (default 5)
 *   BENCH_SWARM_BURST      creates in the burst (default 50)
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster } from "../simulator/cluster/cluster.js";
import { ImageStore } from "../simulator/images/image-store.js";
import { BwrapLauncher, SwarmLauncher, type Launcher } from "../simulator/launcher/index.js";
import { serveSimulator, type ServedSimulator } from "../simulator/serve.js";
import { fmt, peakRssMiB, percentile } from "./lib.js";

const sequential = Number(process.env.BENCH_SWARM_SANDBOXES ?? 5);
const burst = Number(process.env.BENCH_SWARM_BURST ?? 50);
const KEY = "bench-cluster-admin-key";
const WS = "benchcluster";
const IMAGE = "sandbox-kit-bench/cluster-tiny:1";

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/** A few-MB image of the host's /bin/sh and the libraries it and node need (the agent runs the host's node). */
function tinyImageTar(dir: string): string {
  const programs = ["/bin/sh", "/bin/cat", "/bin/hostname", "/bin/echo"];
  const libs = [...programs, process.execPath].flatMap((bin) =>
    [...execFileSync("ldd", [bin], { encoding: "utf8" }).matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]!),
  );
  const paths = [...new Set([...programs, ...libs])].map((p) => p.slice(1));
  const root = join(dir, "root.tar");
  execFileSync("sh", ["-c", 'out="$1"; shift; tar --dereference -cf "$out" -C / "$@"', "sh", root, ...paths], { stdio: "ignore" });
  execFileSync("sh", [
    "-c",
    `docker import - "$1" < "$2" >/dev/null && docker save "$1" > "$3" && docker rmi "$1" >/dev/null`,
    "sh",
    IMAGE,
    root,
    join(dir, "image.tar"),
  ]);
  return join(dir, "image.tar");
}

async function sequentialCreates(sim: ServedSimulator, image: string | undefined, prefix: string): Promise<{ ready: number[]; tti: number[] }> {
  const ready: number[] = [];
  const tti: number[] = [];
  for (let i = 0; i < sequential; i++) {
    const started = performance.now();
    const created = await call(sim.url, "POST", "/v0/sandboxes", { metadata: { name: `${prefix}-${i}` }, spec: { runtime: image ? { image } : {} } });
    if (created.status !== 200) throw new Error(`create ${prefix}-${i}: ${created.status} ${created.text.slice(0, 300)}`);
    ready.push(performance.now() - started);
    const ran = await call(sim.url, "POST", `/sbx/${WS}/${prefix}-${i}/process`, { command: "echo hi", waitForCompletion: true });
    if (ran.status !== 200) throw new Error(`first command in ${prefix}-${i}: ${ran.status} ${ran.text.slice(0, 200)}`);
    tti.push(performance.now() - started);
    await call(sim.url, "DELETE", `/v0/sandboxes/${prefix}-${i}`);
  }
  return { ready: ready.sort((a, b) => a - b), tti: tti.sort((a, b) => a - b) };
}

async function withSimulator<T>(launcher: Launcher, config: object, fn: (sim: ServedSimulator) => Promise<T>): Promise<T> {
  const sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", ...config }, { launcher });
  try {
    return await fn(sim);
  } finally {
    await sim.stop();
  }
}

export async function benchCluster(log: (line: string) => void = console.log): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-cluster-"));
  const cluster = new Cluster({ name: `sbxk-bench-${process.pid}`, log: (line) => log(`cluster: ${line}`) });
  try {
    const bwrap = await withSimulator(new BwrapLauncher({ warm: 0 }), { imageSource: "host" }, (sim) => sequentialCreates(sim, undefined, "bw"));
    const upStarted = performance.now();
    const info = await cluster.up();
    const upMs = performance.now() - upStarted;
    const store = new ImageStore({ dir: join(dir, "images"), docker: null });
    await store.import(tinyImageTar(dir), IMAGE);
    await store.close();
    const launcher = new SwarmLauncher({ env: { ...process.env, DOCKER_HOST: info.dockerHost }, registry: info.registry, readyTimeoutMs: 300_000 });
    const result = await withSimulator(launcher, { imageCache: join(dir, "images") }, async (sim) => {
      await sequentialCreates(sim, IMAGE, "warmup").catch(() => undefined); // the image's first import and push
      const seq = await sequentialCreates(sim, IMAGE, "sw");
      const started = performance.now();
      const names = Array.from({ length: burst }, (_, i) => `burst-${i}`);
      const statuses = await Promise.all(
        names.map((name) => call(sim.url, "POST", "/v0/sandboxes", { metadata: { name }, spec: { runtime: { image: IMAGE } } })),
      );
      const burstMs = performance.now() - started;
      const health = JSON.parse((await call(sim.url, "GET", "/health")).text) as { sandboxes: { nodes?: { name: string; sandboxes: number }[] } };
      await Promise.all(names.map((name) => call(sim.url, "DELETE", `/v0/sandboxes/${name}`)));
      return { seq, ok: statuses.filter((s) => s.status === 200).length, burstMs, nodes: health.sandboxes.nodes ?? [] };
    });
    const med = (xs: number[]) => percentile(xs, 50);
    log(
      `bench:swarm --cluster  3 nodes (cluster up in ${fmt(upMs / 1000, 1)} s), ${sequential} sequential creates per launcher, tiny image via the cluster's registry`,
    );
    log(
      `create-to-ready  cluster median ${fmt(med(result.seq.ready))} ms | bwrap median ${fmt(med(bwrap.ready))} ms | ratio ${fmt(med(result.seq.ready) / med(bwrap.ready), 2)}`,
    );
    log(
      `TTI              cluster median ${fmt(med(result.seq.tti))} ms | bwrap median ${fmt(med(bwrap.tti))} ms | ratio ${fmt(med(result.seq.tti) / med(bwrap.tti), 2)}`,
    );
    log(`orchestrator     +${fmt(med(result.seq.ready) - med(bwrap.ready))} ms per create over bwrap (service, placement, the node's engine, the port)`);
    log(
      `burst            ${result.ok}/${burst} DEPLOYED in ${fmt(result.burstMs / 1000, 1)} s; per node: ${result.nodes.map((n) => `${n.name} ${n.sandboxes}`).join(", ")}`,
    );
    log(`memory           bench process (simulator in it) peak RSS ${fmt(peakRssMiB(process.pid))} MiB`);
  } finally {
    await cluster.down().catch((err: Error) => log(`cluster down failed: ${err.message}`));
    rmSync(dir, { recursive: true, force: true });
  }
}
