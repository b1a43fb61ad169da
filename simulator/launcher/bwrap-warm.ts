import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmdirSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { MemoryCgroup } from "./cgroup.js";
import { isAlive } from "./proc.js";
import type { LaunchSpec, WarmPoolState } from "./types.js";

/**
 * Isolated sandboxes started ahead of need (the isolating launcher's `warm`):
 * namespaces built, overlay mounted, network attached, the agent's modules
 * loaded (simulator/launcher/warm-agent.ts), waiting for a sandbox. Most of an
 * isolated start is that work, so a create that takes one over costs renaming
 * two directories, setting a hostname and a memory limit, and opening the
 * agent's database. A warm sandbox fits a spec with the same drives dir,
 * image and network, no extra mounts, and no files yet (a fresh create; a
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
}

export interface WarmSandbox {
  sandbox: SpawnedSandbox;
  rootDir: string;
  dataDir: string;
  key: string;
  /** Resolves once the warm agent has loaded its modules and the network is up; false when it died first. */
  ready: Promise<boolean>;
}

function poolDir(spec: LaunchSpec): string {
  return join(dirname(dirname(spec.rootDir)), ".warm");
}

function keyOf(spec: LaunchSpec): string {
  return JSON.stringify([poolDir(spec), spec.drivesDir ?? "", spec.imageRootDir ?? "", ...(spec.imageLowerDirs ?? []), spec.outboundNetwork ?? "default"]);
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

const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

export class WarmPool {
  private readonly idle: WarmSandbox[] = [];
  private closed = false;
  private readonly dirs = new Set<string>();
  private readonly removals = new Set<Promise<void>>();

  constructor(
    private readonly size: number,
    private readonly spawn: (spec: LaunchSpec) => SpawnedSandbox,
  ) {}

  /** A warm sandbox for this spec, waiting for it to finish warming if need be (still sooner than a cold start). */
  async take(spec: LaunchSpec): Promise<WarmSandbox | undefined> {
    if (this.size === 0 || spec.mounts?.length || existsSync(spec.rootDir) || existsSync(spec.dataDir)) return undefined;
    const key = keyOf(spec);
    for (;;) {
      const at = this.idle.findIndex((w) => w.key === key);
      if (at === -1) return undefined;
      const [warm] = this.idle.splice(at, 1);
      if ((await warm!.ready) && alive(warm!.sandbox.child) && warm!.sandbox.child.connected) return warm;
      warm!.sandbox.child.kill("SIGKILL");
    }
  }

  /** Starts warm sandboxes for specs like this one until the pool holds `size` of them. */
  refill(spec: LaunchSpec): void {
    if (this.size === 0 || this.closed || spec.mounts?.length) return;
    const key = keyOf(spec);
    while (this.idle.filter((w) => w.key === key).length < this.size) {
      this.dirs.add(poolDir(spec));
      const base = join(poolDir(spec), randomBytes(6).toString("hex"));
      const rootDir = join(base, "root");
      const dataDir = join(base, "data");
      mkdirSync(rootDir, { recursive: true });
      mkdirSync(dataDir, { recursive: true });
      let sandbox: SpawnedSandbox;
      try {
        sandbox = this.spawn({ ...spec, sandbox: "sandbox", rootDir, dataDir, token: "", env: undefined, memoryMb: undefined, mounts: undefined });
      } catch {
        removeQuietly(base);
        return; // the next cold start reports what is wrong
      }
      const child = sandbox.child;
      const loaded = new Promise<boolean>((resolve) => {
        child.once("message", () => resolve(true));
        child.once("exit", () => resolve(false));
      });
      const ready = loaded.then(
        async (ok) =>
          ok &&
          (await sandbox.network().then(
            () => true,
            () => false,
          )),
      );
      const warm: WarmSandbox = { sandbox, rootDir, dataDir, key, ready };
      child.once("exit", () => {
        const at = this.idle.indexOf(warm);
        if (at !== -1) this.idle.splice(at, 1);
        // Taken or not, what is left here is the pool's (taken directories were renamed away).
        removeLater(base, this.removals);
      });
      this.idle.push(warm);
    }
  }

  state(): WarmPoolState {
    return { size: this.size, idle: this.idle.length, pids: this.idle.flatMap((w) => (w.sandbox.child.pid ? [w.sandbox.child.pid] : [])) };
  }

  /** Resolves once every idle warm sandbox is ready (benches, tests). */
  async warmed(): Promise<void> {
    await Promise.all(this.idle.map((w) => w.ready));
  }

  async close(): Promise<void> {
    this.closed = true;
    const idle = this.idle.splice(0);
    await Promise.all(
      idle.map(async ({ sandbox }) => {
        const { child } = sandbox;
        await new Promise<void>((resolve) => {
          if (!alive(child)) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGKILL"); // bwrap ends, and with it the whole namespace
        });
        // Its init (killed with bwrap) may still be setting up: wait for it, so the caller can remove the directories.
        const init = sandbox.sandboxPid();
        for (let waited = 0; init !== undefined && isAlive(init) && waited < 2_000; waited += 20) await sleep(20);
      }),
    );
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
