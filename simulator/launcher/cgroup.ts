import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { isAlive } from "./proc.js";

/**
 * Memory limits for isolated sandboxes (spec.runtime.memory): one cgroup per
 * sandbox start, with the limit set, that the sandbox's first process joins
 * before anything else runs (so everything it starts is counted). cgroup v2
 * (`memory.max`, OOM kills counted in `memory.events`) or the v1 memory
 * controller (`memory.limit_in_bytes`, `memory.oom_control`). The cgroups live
 * under `sandbox-kit-<simulator pid>/` in the simulator's own cgroup (v1) or
 * at the v2 root, so a later run can remove what a killed simulator left.
 */

export interface MemoryCgroup {
  /** Host directory of the cgroup; its cgroup.procs takes the sandbox's first process. */
  dir: string;
  /** The file with the `oom_kill N` counter, bound read-only into the sandbox for the agent. */
  eventsFile: string;
  /** Sets (or changes) the memory limit. */
  limit(limitMb: number): void;
  /** Removes the cgroup once its processes are gone (retries while they exit). */
  remove(): Promise<void>;
}

export interface CgroupSupport {
  /** undefined where limits can be set; else why not (for /health and the start-up log). */
  unavailable?: string;
  version?: 1 | 2;
  /** A new cgroup, with this limit (none yet when undefined: limit() sets it later). */
  create(name: string, limitMb?: number): MemoryCgroup;
}

const V2_ROOT = "/sys/fs/cgroup";
const V1_MEMORY = "/sys/fs/cgroup/memory";

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The simulator's own cgroup path in a hierarchy, from /proc/self/cgroup ("4:memory:/a/b" or "0::/a/b"). */
export function ownCgroup(procSelfCgroup: string, controller: "memory" | ""): string | undefined {
  for (const line of procSelfCgroup.split("\n")) {
    const [, controllers, path] = line.split(":");
    if (controllers === undefined || path === undefined) continue;
    if (controller === "" ? line.startsWith("0::") : controllers.split(",").includes(controller)) return path;
  }
  return undefined;
}

/** Removes the cgroup directories a killed simulator left (their owner's pid is gone; empty cgroups only). */
function sweepStale(parent: string): void {
  let entries: string[];
  try {
    entries = readdirSync(parent);
  } catch {
    return;
  }
  for (const entry of entries) {
    const owner = /^sandbox-kit-(\d+)$/.exec(entry);
    if (!owner || Number(owner[1]) === process.pid || isAlive(Number(owner[1]))) continue;
    removeCgroupTree(join(parent, entry));
  }
}

function removeCgroupTree(dir: string): void {
  try {
    for (const child of readdirSync(dir, { withFileTypes: true })) if (child.isDirectory()) tryRmdir(join(dir, child.name));
  } catch {
    return;
  }
  tryRmdir(dir);
}

function tryRmdir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}

function locate(): { version: 1 | 2; parent: string } | string {
  if (process.platform !== "linux") return "not Linux";
  const self = readFileSync("/proc/self/cgroup", "utf8");
  const controllers = existsSync(join(V2_ROOT, "cgroup.controllers")) ? readFileSync(join(V2_ROOT, "cgroup.controllers"), "utf8") : "";
  if (controllers.split(/\s+/).includes("memory")) {
    // v2 forbids processes in a cgroup whose children have controllers: the sandboxes' cgroups sit at the root, beside the simulator's.
    if (!writable(V2_ROOT)) return "cgroup v2: the root cgroup is not writable (run as root for memory limits)";
    const subtree = readFileSync(join(V2_ROOT, "cgroup.subtree_control"), "utf8");
    if (!subtree.split(/\s+/).includes("memory")) return "cgroup v2: the memory controller is not enabled at the root";
    return { version: 2, parent: V2_ROOT };
  }
  if (existsSync(join(V1_MEMORY, "memory.limit_in_bytes"))) {
    const own = ownCgroup(self, "memory") ?? "/";
    const parent = join(V1_MEMORY, own);
    if (!writable(parent)) return "cgroup v1: the memory cgroup is not writable (run as root for memory limits)";
    return { version: 1, parent };
  }
  return "no cgroup memory controller (neither v2 nor v1) is mounted";
}

export function cgroupSupport(): CgroupSupport {
  let found: ReturnType<typeof locate>;
  try {
    found = locate();
  } catch (err) {
    found = `cannot read cgroups: ${(err as Error).message}`;
  }
  if (typeof found === "string") {
    const why = found;
    return {
      unavailable: why,
      create: () => {
        throw new Error(`memory limits unavailable: ${why}`);
      },
    };
  }
  const { version, parent } = found;
  sweepStale(parent);
  const mine = join(parent, `sandbox-kit-${process.pid}`);
  return {
    version,
    create(name, limitMb) {
      if (!existsSync(mine)) {
        mkdirSync(mine);
        if (version === 2) writeFileSync(join(mine, "cgroup.subtree_control"), "+memory");
        // Empty cgroups go with this process; what is still busy then is swept by a later run.
        process.once("exit", () => removeCgroupTree(mine));
      }
      const dir = join(mine, name);
      mkdirSync(dir);
      const limit = (mb: number) => {
        const bytes = String(Math.max(1, Math.floor(mb)) * 1024 * 1024);
        if (version === 2) {
          writeFileSync(join(dir, "memory.max"), bytes);
          // No swap beyond the limit, as on the platform (where there is swap at all).
          if (existsSync(join(dir, "memory.swap.max"))) writeFileSync(join(dir, "memory.swap.max"), "0");
        } else {
          // v1 refuses a memsw limit below the memory limit and a memory limit above the memsw one: order them.
          const memsw = join(dir, "memory.memsw.limit_in_bytes");
          const current = Number(readFileSync(join(dir, "memory.limit_in_bytes"), "utf8"));
          if (existsSync(memsw) && Number(bytes) > current) writeFileSync(memsw, bytes);
          writeFileSync(join(dir, "memory.limit_in_bytes"), bytes);
          if (existsSync(memsw)) writeFileSync(memsw, bytes);
        }
      };
      if (limitMb !== undefined) limit(limitMb);
      return {
        dir,
        limit,
        eventsFile: join(dir, version === 2 ? "memory.events" : "memory.oom_control"),
        async remove() {
          // The per-simulator parent stays (other launchers of this process share it); a later run sweeps it.
          for (let tries = 0; tries < 50 && !tryRmdir(dir); tries++) await sleep(20);
        },
      };
    },
  };
}
