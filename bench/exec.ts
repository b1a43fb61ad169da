/**
 * bench:exec — a command's round trip: `process.exec({command: "node -v", waitForCompletion: true})` as the
 * SDK sends it through the sandbox URL (the simulator's proxy, then the sandbox's agent: its spawn through the
 * process wrapper, the shell, node itself), beside the same POST /process straight to the agent (no proxy hop),
 * `true` by both ways (what the path costs with next to nothing to run), and `node -v` spawned alone on the
 * host: the floor no sandbox can go under, Node's own start-up. One sandbox of the default launcher over
 * blaxel/base-image when the image store has it built (else the host's root, --image-source host), the
 * simulator in its own process so its CPU is apart from this client's; commands one after another.
 *
 *   BENCH_EXEC_N             round trips of each kind (default 30)
 *   BENCH_EXEC_IMAGE_SOURCE  host: the host's root (and node) even when the image is built
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { defaultImageCacheDir, ImageStore } from "../simulator/images/image-store.js";
import type { AgentEndpoint } from "../simulator/launcher/endpoint.js";
import { fmt, percentile, pointSdkAt } from "./lib.js";

const N = Number(process.env.BENCH_EXEC_N ?? 30);
const KEY = "bench-exec-admin-key";
const SANDBOX = "bench-exec";

async function timed(n: number, one: () => Promise<void>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await one();
    ms.push(performance.now() - t);
  }
  return ms.sort((a, b) => a - b);
}

function line(name: string, ms: number[], floor?: number): string {
  const median = percentile(ms, 50);
  const over = floor === undefined ? "" : ` | +${fmt(median - floor, 1)} ms over the floor`;
  return `${name.padEnd(34)} min ${fmt(ms[0]!, 1).padStart(6)}  median ${fmt(median, 1).padStart(6)}  p90 ${fmt(percentile(ms, 90), 1).padStart(6)}  max ${fmt(ms[ms.length - 1]!, 1).padStart(6)} ms${over}`;
}

/** `node -v` spawned alone (no shell, no sandbox): the process start a sandbox's `node -v` cannot avoid. */
function spawned(file: string, args: string[]): () => Promise<void> {
  return () =>
    new Promise((resolve, reject) => {
      const child = spawn(file, args, { stdio: ["ignore", "ignore", "ignore"] });
      child.once("error", reject);
      child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${file} ${args.join(" ")} exited ${code}`))));
    });
}

/**
 * The image's own node, run on the host from the image's files through the image's dynamic loader (what runs
 * in the sandbox, minus the sandbox): blaxel/base-image's is Node.js's official single binary in /usr/local
 * (Debian's, before, was a small binary linking libnode.so and 17 other libraries: ~40 ms of loading and
 * relocation per `node -v`).
 */
function imageNode(rootfs: string): () => Promise<void> {
  const libs = [`${rootfs}/lib/x86_64-linux-gnu`, `${rootfs}/usr/lib/x86_64-linux-gnu`].join(":");
  return spawned(`${rootfs}/lib64/ld-linux-x86-64.so.2`, ["--library-path", libs, `${rootfs}/usr/local/bin/node`, "-v"]);
}

/** The image's root when the store has blaxel/base-image built (and BENCH_EXEC_IMAGE_SOURCE does not say host). */
function builtImage(): string | undefined {
  if (process.env.BENCH_EXEC_IMAGE_SOURCE === "host") return undefined;
  return new ImageStore({ dir: process.env.SANDBOX_SIM_IMAGE_CACHE || defaultImageCacheDir(), docker: null }).get("blaxel/base-image:latest")?.rootfs;
}

async function main(): Promise<void> {
  const rootfs = builtImage();
  const source = rootfs ? "store" : "host";
  const hostNode = spawned(process.execPath, ["-v"]);
  // The floor: the `node -v` the sandbox runs, alone.
  const floorRun = rootfs ? imageNode(rootfs) : hostNode;
  const sim = await startSim(source);
  pointSdkAt(sim.url, KEY);
  try {
    const { SandboxInstance } = await import("@blaxel/core");
    const { agentFetch } = await import("../simulator/launcher/endpoint.js");
    const sandbox = await SandboxInstance.create({ name: SANDBOX });
    const viaSdk = (command: string) => async () => {
      const r = await sandbox.process.exec({ command, waitForCompletion: true });
      if (r.exitCode !== 0) throw new Error(`${command} exited ${r.exitCode}: ${r.stderr}`);
    };
    const agent = await sim.agent();
    const direct = (command: string) => async () => {
      const r = await agentFetch(agent.endpoint, {
        method: "POST",
        path: "/process",
        headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
        body: JSON.stringify({ command, waitForCompletion: true }),
      });
      if (r.status !== 200 || JSON.parse(r.text).exitCode !== 0) throw new Error(`${command}: ${r.status} ${r.text.slice(0, 200)}`);
    };
    // The same POST through the sandbox URL without the SDK: the proxy hop alone, apart from the SDK's own work.
    const sandboxUrl = new URL(sandbox.metadata?.url ?? `${sim.url}/sbx/default/${SANDBOX}`);
    const proxied = (command: string) => async () => {
      const r = await agentFetch(
        { url: sandboxUrl.origin },
        {
          method: "POST",
          path: `${sandboxUrl.pathname}/process`,
          headers: { "x-blaxel-authorization": `Bearer ${KEY}`, "x-blaxel-workspace": "default", "content-type": "application/json" },
          body: JSON.stringify({ command, waitForCompletion: true }),
        },
      );
      if (r.status !== 200 || JSON.parse(r.text).exitCode !== 0) throw new Error(`${command}: ${r.status} ${r.text.slice(0, 200)}`);
    };
    // Warm-up: the first commands pay for page-cache misses and the JIT of both sides.
    for (let i = 0; i < 3; i++) {
      await viaSdk("node -v")();
      await direct("node -v")();
      await proxied("node -v")();
      await floorRun();
    }
    const host = await timed(N, hostNode);
    const floor = rootfs ? await timed(N, floorRun) : host;
    const sdkNode = await timed(N, viaSdk("node -v"));
    const proxiedNode = await timed(N, proxied("node -v"));
    const directNode = await timed(N, direct("node -v"));
    const sdkTrue = await timed(N, viaSdk("true"));
    const proxiedTrue = await timed(N, proxied("true"));
    const directTrue = await timed(N, direct("true"));
    const f = percentile(floor, 50);
    console.log(
      `bench:exec — ${N} round trips each, one after another; one sandbox (default launcher, ${source === "store" ? "blaxel/base-image" : "the host's root, --image-source host"}); ${cpus().length} CPUs, load average ${loadavg()
        .map((n) => fmt(n, 2))
        .join(" ")}`,
    );
    console.log(line("node -v alone, the host's node", host));
    if (rootfs) console.log(line("node -v alone, the image's (floor)", floor));
    console.log(line("SDK exec node -v (sandbox URL)", sdkNode, f));
    console.log(line("POST /process node -v (sandbox URL)", proxiedNode, f));
    console.log(line("agent POST /process node -v", directNode, f));
    console.log(line("SDK exec true (sandbox URL)", sdkTrue));
    console.log(line("POST /process true (sandbox URL)", proxiedTrue));
    console.log(line("agent POST /process true", directTrue));
    console.log(
      `target: SDK exec node -v <= 20 ms on an idle machine; the floor is the sandbox's node -v run alone on this machine (${rootfs ? "the image's node" : "the host's node"}), "over the floor" what the proxy, the agent, its process wrapper and the shell add`,
    );
    await SandboxInstance.delete(SANDBOX).catch(() => undefined);
  } finally {
    const exited = new Promise((r) => sim.child.once("exit", r));
    sim.child.disconnect();
    await exited;
  }
}

/**
 * The simulator's process (this script with --serve): the same serveSimulator as `sandbox-sim`, which can
 * also tell the bench its sandbox's agent endpoint and token (for the straight-to-the-agent line).
 */
async function serve(source: "store" | "host"): Promise<void> {
  const { serveSimulator } = await import("../simulator/serve.js");
  const sim = await serveSimulator({ port: 0, apiKey: KEY, logLevel: "warn", imageSource: source, prebuild: "none", warmSandboxes: 0 });
  process.send!({ url: sim.url });
  process.on("message", async () => {
    const { url, socketPath, token } = await sim.deps.agents!.upstream({ workspace: "default", sandbox: SANDBOX, path: "/" });
    process.send!({ endpoint: { url, socketPath }, token });
  });
  process.on("disconnect", () => void sim.stop().then(() => process.exit(0)));
}

function startSim(source: "store" | "host"): Promise<{ child: ChildProcess; url: string; agent(): Promise<{ endpoint: AgentEndpoint; token: string }> }> {
  const child = fork(fileURLToPath(import.meta.url), ["--serve", source], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      child.once("message", (m) => resolve(m as T));
      child.once("exit", (code) => reject(new Error(`the simulator exited with ${code}`)));
    });
  return next<{ url: string }>().then(({ url }) => ({
    child,
    url,
    agent: () => {
      const r = next<{ endpoint: AgentEndpoint; token: string }>();
      child.send({});
      return r;
    },
  }));
}

const serveAt = process.argv.indexOf("--serve");
(serveAt === -1 ? main() : serve(process.argv[serveAt + 1] as "store" | "host")).catch((err) => {
  process.stderr.write(`bench:exec: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
