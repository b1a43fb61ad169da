import { mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../../src/logging.js";
import { removeTree, type Launcher } from "../launcher/types.js";
import { mountsUnder } from "../../src/mounts.js";

/**
 * Files of deleted sandboxes, kept for the retention period (--sandbox-retention)
 * and then removed by a sweeper that reads the simulator's clock, so test
 * hooks that move the clock move the removals too. A retired sandbox's
 * directory moves at once to <dir>/retired/<workspace>/<sandbox>@<due ms>:
 * the name is free again for a new sandbox, and the due time survives a
 * restart of a simulator run with --data.
 */

export interface RetiredSandbox {
  workspace: string;
  sandbox: string;
  dueMs: number;
  path: string;
}

export class RetiredSandboxes {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dir: string,
    private readonly now: () => number,
    private readonly logger?: Logger,
    private readonly launcher?: Pick<Launcher, "removeTree">,
  ) {}

  private get root(): string {
    return join(this.dir, "retired");
  }

  /** Moves a stopped sandbox's directory aside until `dueMs` (simulator clock). */
  retire(workspace: string, sandbox: string, sandboxDir: string, dueMs: number): string {
    const target = join(this.root, workspace, `${sandbox}@${dueMs}`);
    mkdirSync(join(this.root, workspace), { recursive: true });
    renameSync(sandboxDir, target);
    return target;
  }

  list(): RetiredSandbox[] {
    const out: RetiredSandbox[] = [];
    for (const workspace of safeReaddir(this.root)) {
      for (const entry of safeReaddir(join(this.root, workspace))) {
        const at = entry.lastIndexOf("@");
        const dueMs = Number(entry.slice(at + 1));
        if (at <= 0 || !Number.isFinite(dueMs)) continue;
        out.push({ workspace, sandbox: entry.slice(0, at), dueMs, path: join(this.root, workspace, entry) });
      }
    }
    return out;
  }

  /**
   * Removes every retired sandbox whose time has come. One with something
   * still mounted under it is kept (deleting through a bind mount would
   * delete a drive's files) and retried at the next sweep.
   */
  sweep(): RetiredSandbox[] {
    const now = this.now();
    const removed: RetiredSandbox[] = [];
    for (const item of this.list()) {
      if (item.dueMs > now) continue;
      const mounted = mountsUnder(item.path);
      if (mounted.length > 0) {
        this.logger?.warn({ workspace: item.workspace, sandbox: item.sandbox, mounted }, "retired sandbox still has mounts: its files are kept");
        continue;
      }
      try {
        removeTree(item.path, this.launcher);
        removed.push(item);
        this.logger?.info({ workspace: item.workspace, sandbox: item.sandbox }, "retired sandbox files removed");
      } catch (err) {
        this.logger?.warn({ workspace: item.workspace, sandbox: item.sandbox, err: (err as Error).message }, "retired sandbox files could not be removed");
      }
    }
    return removed;
  }

  /** Sweeps every `everyMs` of real time (the simulator clock decides what is due). */
  startSweeping(everyMs: number): void {
    this.stopSweeping();
    this.timer = setInterval(() => this.sweep(), everyMs);
    this.timer.unref();
  }

  stopSweeping(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
