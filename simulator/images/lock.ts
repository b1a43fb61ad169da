import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * One builder per image, in this process and across processes (two
 * simulators, or test files running in parallel, sharing the image cache):
 * the holder creates `<dir>/<key>.lock` exclusively with its pid; the
 * others wait until it is gone. A lock whose holder died (same host, pid no
 * longer alive) is taken over.
 */

const inProcess = new Map<string, Promise<unknown>>();

interface Holder {
  pid: number;
  host: string;
  since: string;
}

/** Whether a process of this pid runs (EPERM: it does, owned by someone else). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readHolder(path: string): Holder | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Holder;
  } catch {
    return undefined; // being written, or gone
  }
}

function tryAcquire(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  writeSync(fd, JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString() } satisfies Holder));
  closeSync(fd);
  return true;
}

export interface LockOptions {
  /** Called once when another process holds the lock, with its pid. */
  onWait?: (holder: Holder | undefined) => void;
  pollMs?: number;
}

async function acquireFile(path: string, options: LockOptions): Promise<void> {
  let told = false;
  for (;;) {
    if (tryAcquire(path)) return;
    const holder = readHolder(path);
    if (holder && holder.host === hostname() && !alive(holder.pid)) {
      try {
        unlinkSync(path); // its holder died without releasing it
      } catch {
        /* another waiter took it over first */
      }
      continue;
    }
    if (!told) {
      told = true;
      options.onWait?.(holder);
    }
    await sleep(options.pollMs ?? 250);
  }
}

/** Runs `fn` holding the lock `key` under `dir` (created when missing). */
export function withLock<T>(dir: string, key: string, fn: () => Promise<T>, options: LockOptions = {}): Promise<T> {
  const path = join(dir, `${key}.lock`);
  const previous = inProcess.get(path) ?? Promise.resolve();
  const run = previous.then(async () => {
    mkdirSync(dir, { recursive: true });
    await acquireFile(path, options);
    try {
      return await fn();
    } finally {
      try {
        unlinkSync(path);
      } catch {
        /* removed with the store */
      }
    }
  });
  const settled = run.then(
    () => undefined,
    () => undefined,
  );
  inProcess.set(path, settled);
  void settled.then(() => {
    if (inProcess.get(path) === settled) inProcess.delete(path);
  });
  return run;
}
