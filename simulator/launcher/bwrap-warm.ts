import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmdirSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { MemoryCgroup } from "./cgroup.js";
import { killTree, stateOf } from "./proc.js";
import type { LaunchSpec, WarmPoolState } from "./types.js";
import { stopChild, WarmPool } from "./warm-pool.js";

/**
 * Isolated sandboxes started ahead of need (the isolating launcher's `warm`):
 * namespaces built, overlay mounted, network attached, the agent's modules
 * loaded (simulator/launcher/warm-agent.ts), waiting for a sandbox. Most of an
 * isolated start is that work, so a create that takes one over costs renaming
 * two directories, setting a hostname and a memory limit, and opening the
 * agent's database. A warm sandbox fits a spec with the same drives dir,
 * image, network and extra CAs for its agent (NODE_EXTRA_CA_CERTS), no extra mounts, and no files yet (a fresh create; a
 * restart, fork or restore starts cold). Warm sandboxes live beside the
 * sandboxes' directories (<dir>/.warm/<id>), so the renames stay on one filesystem.
 */

export interface SpawnedSandbox {
  child: ChildProcess;
  cgroup?: MemoryCgroup;
  /** Attaches the sandbox's outbound network (once: later calls return the same promise). */
  network: () => Promise<void>;
  /** Attaches (true) or removes (false) the direct outbound network, applied in order (AgentHandle.setDirectOutbound). */
  setDirect: (on: boolean) => Promise<void>;
  sandboxPid: () => number | undefined;
  /** Settles with the sandbox's PID 1 once bwrap reports it (rejects if bwrap ends first). */
  reportedPid?: Promise<number>;
}

export interface WarmSandbox {
  sandbox: SpawnedSandbox;
  rootDir: string;
  dataDir: string;
}

function poolDir(spec: LaunchSpec): string {
  return join(dirname(dirname(spec.rootDir)), ".warm");
}

/** The one variable of a spec's environment a warm agent starts with: its Node reads it at start-up only (bwrap.ts agentCaEnv). */
function startupEnv(spec: LaunchSpec): Record<string, string> | undefined {
  const ca = spec.env?.NODE_EXTRA_CA_CERTS;
  return ca === undefined ? undefined : { NODE_EXTRA_CA_CERTS: ca };
}

function keyOf(spec: LaunchSpec): string {
  return JSON.stringify([
    poolDir(spec),
    spec.drivesDir ?? "",
    spec.imageRootDir ?? "",
    ...(spec.imageLowerDirs ?? []),
    spec.outboundNetwork ?? "default",
    spec.env?.NODE_EXTRA_CA_CERTS ?? "",
  ]);
}

/**
 * Kills a warm sandbox's whole process tree and resolves once its processes are gone (its directories may then be
 * removed). Not a SIGKILL to the outer bwrap alone: its namespace's init dies with it (--die-with-parent) only once
 * it has finished its setup, and one killed before that is left waiting for the outer bwrap forever, reparented to
 * pid 1 (seen in CI after a warm sandbox was stopped right after it was spawned). killTree reaches it first.
 */
export async function killWarmSandbox(sandbox: SpawnedSandbox): Promise<void> {
  const pids = sandbox.child.pid === undefined ? [] : killTree(sandbox.child.pid);
  await stopChild(sandbox.child, "SIGKILL");
  const running = (pid: number) => !["Z", "X", undefined].includes(stateOf(pid));
  for (let waited = 0; pids.some(running) && waited < 2_000; waited += 20) await sleep(20);
}

/** A sandbox killed mid-setup may still be creating mount points there: retry once, never throw from an exit handler. */
function removeQuietly(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 });
  } catch {
    // Left for the simulator's own data-dir clean-up.
  }
}

/**
 * removeQuietly off the event loop: a warm sandbox's directories go when it exits, at every delete, and removing
 * them synchronously held the simulator's requests for 50 ms a sandbox on a busy disk (its overlay's upper layer:
 * the mount points bwrap made). close() waits for these.
 */
function removeLater(dir: string, pending: Set<Promise<void>>): void {
  const done: Promise<void> = rm(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 })
    .catch(() => undefined) // left for the simulator's own data-dir clean-up
    .finally(() => pending.delete(done));
  pending.add(done);
}

/** The bwrap launcher's use of the shared WarmPool: a warm sandbox owns its directories under <dir>/.warm. */
export class BwrapWarmPool {
  private readonly pool: WarmPool<WarmSandbox & { base: string }, LaunchSpec>;
  private readonly dirs = new Set<string>();
  private readonly removals = new Set<Promise<void>>();

  constructor(size: number, spawn: (spec: LaunchSpec) => SpawnedSandbox) {
    this.pool = new WarmPool({
      size,
      keyOf,
      spawn: (spec) => {
        this.dirs.add(poolDir(spec));
        const base = join(poolDir(spec), randomBytes(6).toString("hex"));
        const rootDir = join(base, "root");
        const dataDir = join(base, "data");
        mkdirSync(rootDir, { recursive: true });
        mkdirSync(dataDir, { recursive: true });
        try {
          const sandbox = spawn({ ...spec, sandbox: "sandbox", rootDir, dataDir, token: "", env: startupEnv(spec), memoryMb: undefined, mounts: undefined });
          return { sandbox, rootDir, dataDir, base };
        } catch {
          removeQuietly(base);
          return undefined; // the next cold start reports what is wrong
        }
      },
      child: (warm) => warm.sandbox.child,
      afterLoad: (warm) =>
        warm.sandbox.network().then(
          () => true,
          () => false,
        ),
      // Taken or not, what is left here is the pool's (taken directories were renamed away).
      exited: (warm) => removeLater(warm.base, this.removals),
      discard: (warm) => void killWarmSandbox(warm.sandbox),
      stop: (warm) => killWarmSandbox(warm.sandbox),
    });
  }

  /** A warm sandbox for this spec: only a fresh create (no files yet, no extra mounts) takes one. */
  take(spec: LaunchSpec): Promise<WarmSandbox | undefined> {
    if (this.pool.size === 0 || spec.mounts?.length || existsSync(spec.rootDir) || existsSync(spec.dataDir)) return Promise.resolve(undefined);
    return this.pool.take(spec);
  }

  /** Starts warm sandboxes for specs like this one until the pool holds `size` of them. */
  refill(spec: LaunchSpec): void {
    if (spec.mounts?.length) return;
    this.pool.refill(spec);
  }

  state(): WarmPoolState {
    return this.pool.state();
  }

  /** Resolves once every idle warm sandbox is ready (benches, tests). */
  warmed(): Promise<void> {
    return this.pool.warmed();
  }

  async close(): Promise<void> {
    await this.pool.close();
    await Promise.all([...this.removals]);
    for (const dir of this.dirs) {
      try {
        rmdirSync(dir); // only when empty: a warm sandbox taken over may still run from one
      } catch {
        // Not empty, or gone.
      }
    }
  }
}
