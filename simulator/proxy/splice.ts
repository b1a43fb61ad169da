import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { getSystemErrorName } from "node:util";

/**
 * The kernel's splice(2) for request bodies going straight to an in-sandbox
 * server (native/splice.c, built by scripts/build-native.mjs into dist/native).
 * Copying an upload through JS costs the proxy ~2–3 ms of CPU per MiB (a read,
 * the HTTP parser's copy, a write); spliced, the bytes move from the caller's
 * socket to the sandbox's in the kernel, on a thread of their own. Where the
 * addon is not built (no compiler, not Linux) or SANDBOX_SIM_SPLICE=0, nothing
 * changes: the body is piped in JS.
 */

interface SpliceAddon {
  start(inFd: number, outFd: number, bytes: number, idleMs: number, done: (errno: number, moved: number) => void): number;
  abort(handle: number): void;
}

function load(): SpliceAddon | undefined {
  if (process.platform !== "linux" || process.env.SANDBOX_SIM_SPLICE === "0") return undefined;
  const require = createRequire(import.meta.url);
  // dist/simulator/proxy -> dist/native; simulator/proxy (tests on the sources) -> dist/native
  for (const path of ["../../native/splice.node", "../../dist/native/splice.node"]) {
    try {
      return require(path) as SpliceAddon;
    } catch {
      // Not built there.
    }
  }
  return undefined;
}

const addon = load();

/** Bodies smaller than this are piped: a thread per request costs more than copying them. */
export const SPLICE_MIN_BYTES = 1024 * 1024;
/** Transfers at once; more are piped in JS (each holds a thread and four descriptors). */
const MAX_TRANSFERS = 64;
let running = 0;

export function spliceAvailable(): boolean {
  return addon !== undefined;
}

/** The descriptor under a net.Socket, or undefined (TLS, a socket without one). */
export function socketFd(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return typeof fd === "number" && fd >= 0 ? fd : undefined;
}

export interface SpliceTransfer {
  /** Resolves with the bytes moved; rejects with an errno-style error (ECONNRESET: the sender ended early; ETIMEDOUT; ECANCELED). */
  done: Promise<number>;
  /** Ends the transfer early; a no-op once it has ended. */
  abort(): void;
}

/** Whether a new transfer may start now (the addon is there and the cap is not reached). */
export function canSplice(): boolean {
  return addon !== undefined && running < MAX_TRANSFERS;
}

/** Moves exactly `bytes` from `fromFd` to `toFd` in the kernel. Both stay the caller's: the addon works on duplicates. */
export function spliceBytes(fromFd: number, toFd: number, bytes: number, idleMs: number): SpliceTransfer {
  if (!addon) throw new Error("kernel splice is not available");
  let ended = false;
  let settle!: (errno: number, moved: number) => void;
  const done = new Promise<number>((resolve, reject) => {
    settle = (errno, moved) => {
      if (errno === 0) return resolve(moved);
      reject(Object.assign(new Error(`splice: ${errnoName(errno)} after ${moved} of ${bytes} bytes`), { code: errnoName(errno), moved }));
    };
  });
  // Throws (no descriptors or thread left) before anything moved: the caller pipes instead.
  const handle = addon.start(fromFd, toFd, bytes, idleMs, (errno, moved) => {
    ended = true;
    running--;
    settle(errno, moved);
  });
  running++;
  // The handle is a descriptor number the addon closes right after done(): never written once ended.
  return { done, abort: () => void (ended || addon.abort(handle)) };
}

/** ECONNRESET, ETIMEDOUT... from the addon's errno (Node's own table, which takes libuv's negative codes). */
function errnoName(errno: number): string {
  return getSystemErrorName(-errno);
}

/** Transfers running now (tests: every one ends, whatever the caller or the server did). */
export function splicesRunning(): number {
  return running;
}
