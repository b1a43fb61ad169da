/**
 * bench:e2e's isolated-sandbox lines, each beside a baseline measured in the same run:
 *  - create-to-ready of an isolated sandbox (the default launcher), against the process launcher's cold start;
 *  - N idle sandboxes running at once, memory per sandbox (agent, bwrap and slirp4netns included): what the
 *    machine's available memory (MemAvailable) drops by per sandbox, the sum of PSS (shared pages split
 *    between the processes sharing them) and the sum of RSS (every shared page counted in each process: the
 *    node binary's pages alone are most of an idle Node process's RSS, hence the idle bare `node` printed
 *    beside it), against N idle process-launcher agents.
 *
 *   BENCH_E2E_ISOLATED  isolated sandboxes to create one after another (default 50)
 *   BENCH_E2E_IDLE      idle sandboxes running at once (default 100)
 */
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { defaultImageCacheDir, ImageStore } from "../simulator/images/image-store.js";
import { parseLdd } from "../simulator/launcher/sandbox-kit.js";
import { BwrapLauncher, ProcessLauncher, probeIsolation, type AgentHandle, type LaunchSpec, type Launcher } from "../simulator/launcher/index.js";
import { descendantsOf } from "../simulator/launcher/proc.js";
import { fmt, percentile } from "./lib.js";

const isolatedCount = Number(process.env.BENCH_E2E_ISOLATED ?? 50);
const idleCount = Number(process.env.BENCH_E2E_IDLE ?? 100);

/** The image isolated sandboxes start from: blaxel/base-image when the shared store has it built, else a tiny one made here. */
let imageRootDir: string | undefined;

function cachedImage(base: string): { rootfs: string; label: string } {
  const hub = new ImageStore({ dir: process.env.SANDBOX_SIM_IMAGE_CACHE || defaultImageCacheDir(), docker: null }).get("blaxel/base-image:latest");
  if (hub) return { rootfs: hub.rootfs, label: "blaxel/base-image from the image store" };
  const rootfs = join(base, "tiny-image");
  for (const bin of ["/bin/sh", "/bin/cat"].map((b) => realpathSync(b))) {
    const { libs, loader } = parseLdd(execFileSync("ldd", [bin], { encoding: "utf8" }));
    for (const [inImage, host] of [[bin, bin], ...[...libs.values(), ...(loader ? [loader] : [])].map((l) => [l, realpathSync(l)])]) {
      mkdirSync(join(rootfs, dirname(inImage!)), { recursive: true });
      copyFileSync(host!, join(rootfs, inImage!));
    }
  }
  if (realpathSync("/bin/sh") !== "/bin/sh") {
    mkdirSync(join(rootfs, "bin"), { recursive: true });
    symlinkSync(realpathSync("/bin/sh"), join(rootfs, "bin/sh"));
  }
  mkdirSync(join(rootfs, "etc"), { recursive: true });
  writeFileSync(join(rootfs, "etc/os-release"), "ID=bench-tiny\n");
  return { rootfs, label: "a tiny image (sh, cat; blaxel/base-image is not built in the store)" };
}

function specIn(base: string, name: string): LaunchSpec {
  // 4096 MB is what the SDK asks for by default: the memory cgroup is part of what an isolated start costs.
  return {
    workspace: "bench",
    sandbox: name,
    rootDir: join(base, name, "root"),
    dataDir: join(base, name, "data"),
    token: `token-${name}-abcdefgh`,
    logLevel: "warn",
    memoryMb: 4096,
    imageRootDir,
  };
}

async function timedStarts(launcher: Launcher & { warmed?: () => Promise<void> }, base: string, prefix: string, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    await launcher.warmed?.(); // as the simulator runs: one create at a time, each after the refill
    const start = performance.now();
    const agent = await launcher.start(specIn(base, `${prefix}-${i}`));
    times.push(performance.now() - start);
    await agent.stop();
  }
  return times.sort((a, b) => a - b);
}

/** KiB of one field (Rss, Pss) of a process's smaps_rollup; 0 when it is gone. */
function memoryKiB(pid: number, field: "Rss" | "Pss"): number {
  try {
    return Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Every host process of a sandbox: the launcher's child, what it started, and its slirp4netns (a child of this process). */
function sandboxPids(handle: AgentHandle, slirps: Map<number, number>): number[] {
  const pids = handle.pid ? [handle.pid, ...descendantsOf(handle.pid)] : [];
  const slirp = handle.sandboxPid ? slirps.get(handle.sandboxPid) : undefined;
  return slirp ? [...pids, slirp] : pids;
}

/** slirp4netns processes of this bench, by the sandbox pid they serve (their last-but-one argument). */
function slirpsBySandbox(): Map<number, number> {
  const map = new Map<number, number>();
  for (const pid of descendantsOf(process.pid)) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
      if (argv[0]?.endsWith("slirp4netns")) map.set(Number(argv.at(-2)), pid);
    } catch {
      // Gone.
    }
  }
  return map;
}

/** MemAvailable of /proc/meminfo, KiB: what the kernel could give without swapping. */
function availableKiB(): number {
  return Number(/^MemAvailable:\s+(\d+)/m.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0);
}

/** RSS and PSS of an idle `node` that loaded nothing: the floor under any Node agent. */
async function bareNodeKiB(): Promise<{ rss: number; pss: number }> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  await new Promise((r) => setTimeout(r, 1_000));
  const sizes = { rss: memoryKiB(child.pid!, "Rss"), pss: memoryKiB(child.pid!, "Pss") };
  child.kill("SIGKILL");
  return sizes;
}

const settle = () => new Promise((r) => setTimeout(r, 2_000)); // idle: start-up garbage collected, nothing running

async function idleMemory(
  launcher: Launcher,
  base: string,
  prefix: string,
  count: number,
): Promise<{ rssMiB: number; pssMiB: number; machineMiB: number; started: number }> {
  const handles: AgentHandle[] = [];
  try {
    await settle();
    const before = availableKiB();
    for (let i = 0; i < count; i++) handles.push(await launcher.start(specIn(base, `${prefix}-${i}`)));
    await settle();
    const machine = before - availableKiB();
    const slirps = slirpsBySandbox();
    let rss = 0;
    let pss = 0;
    for (const h of handles) {
      for (const pid of sandboxPids(h, slirps)) {
        rss += memoryKiB(pid, "Rss");
        pss += memoryKiB(pid, "Pss");
      }
    }
    const per = (kib: number) => kib / 1024 / handles.length;
    return { rssMiB: per(rss), pssMiB: per(pss), machineMiB: per(machine), started: handles.length };
  } finally {
    await Promise.all(handles.map((h) => h.stop()));
  }
}

/**
 * What mapping every user id (unshare --map-users/--map-groups: newuidmap and
 * newgidmap, two setuid helpers, per sandbox) adds to a cold isolated start,
 * beside the same starts with one id, alternated so both see the same machine.
 * (A warm sandbox pays it ahead of the create.)
 */
async function idMappingCost(base: string): Promise<void> {
  const all = new BwrapLauncher();
  const one = new BwrapLauncher({ ids: "single" });
  const ids = all.mapIds();
  if (ids.kind === "single") {
    console.log(`id-range mapping  skipped: sandboxes get a single id here (${ids.reason})`);
    return;
  }
  const count = Math.min(10, isolatedCount);
  const withRange: number[] = [];
  const withOne: number[] = [];
  for (let i = 0; i < count; i++) {
    withRange.push(...(await timedStarts(all, base, `ids-all-${i}`, 1)));
    withOne.push(...(await timedStarts(one, base, `ids-one-${i}`, 1)));
  }
  const [a, b] = [withRange.sort((x, y) => x - y), withOne.sort((x, y) => x - y)].map((t) => percentile(t, 50));
  console.log(
    `create-to-ready (isolated, cold) with every user id (ids 0-${ids.uid.count}, newuidmap/newgidmap) median ${fmt(a!)} ms | baseline one id (uid 0 only, as before) median ${fmt(b!)} ms | cost of the mapping ${fmt(a! - b!)} ms, ratio ${fmt(a! / b!, 2)} (${count} each, alternated)`,
  );
}

/** Prints the isolated-sandbox lines; skips them, saying why, where isolation is unavailable. */
export async function benchIsolation(base: string): Promise<void> {
  const probe = probeIsolation();
  if (!probe.tools) {
    console.log(`isolated  skipped: ${probe.unavailable}`);
    return;
  }
  const image = cachedImage(base);
  imageRootDir = image.rootfs;
  // As the simulator runs it: one warm isolated sandbox kept ready per workspace and image.
  const warm = new BwrapLauncher({ warm: 1 });
  const isolated = new BwrapLauncher();
  const cold = new ProcessLauncher();
  warm.prepare(specIn(join(base, "warm"), "prepared")); // as the simulator does for its default workspace at start
  const times = await timedStarts(warm, join(base, "warm"), "iso", isolatedCount);
  await warm.close();
  const coldIsolated = await timedStarts(isolated, base, "iso-cold", Math.min(10, isolatedCount));
  imageRootDir = undefined; // the process launcher runs on the host's root
  const baseline = await timedStarts(cold, base, "proc", Math.min(10, isolatedCount));
  console.log(
    `create-to-ready (isolated, warm sandbox over ${image.label}; ${isolated.isolationDetail()})  median ${fmt(percentile(times, 50))} ms | p99 ${fmt(percentile(times, 99))} ms over ${times.length} (target median <= 300 ms, p99 <= 1000 ms) | baselines: isolated cold start median ${fmt(percentile(coldIsolated, 50))} ms, process launcher cold start median ${fmt(percentile(baseline, 50))} ms (${baseline.length} each)`,
  );
  await idMappingCost(base);
  imageRootDir = image.rootfs;
  const iso = await idleMemory(isolated, base, "idle-iso", idleCount);
  imageRootDir = undefined;
  const plain = await idleMemory(cold, base, "idle-proc", idleCount);
  const bare = await bareNodeKiB();
  console.log(
    `idle sandboxes  ${iso.started} isolated at once, per sandbox (agent, bwrap, slirp4netns): machine memory ${fmt(iso.machineMiB)} MiB (MemAvailable drop), PSS ${fmt(iso.pssMiB)} MiB, RSS ${fmt(iso.rssMiB)} MiB (target <= 40 MiB) | baseline ${plain.started} process-launcher agents: machine ${fmt(plain.machineMiB)} MiB, PSS ${fmt(plain.pssMiB)} MiB, RSS ${fmt(plain.rssMiB)} MiB each | an idle bare \`node -e\`: RSS ${fmt(bare.rss / 1024)} MiB, PSS ${fmt(bare.pss / 1024)} MiB`,
  );
}
