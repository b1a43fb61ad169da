import { close, fstat, type Stats } from "node:fs";
import { createRequire } from "node:module";
import { getSystemErrorName, promisify } from "node:util";

/**
 * openat2(2) through the native addon (native/confine.c, built into dist/native by
 * scripts/build-native.mjs). Where it is not built, or the kernel predates 5.6 (ENOSYS) or a
 * seccomp filter refuses it (EPERM), `openat2Support()` says why and the agent confines paths
 * with its own descriptor walk (beneath.ts) instead.
 */
interface ConfineAddon {
  openat2(dirfd: number, path: string, flags: number, mode: number, resolve: number, cb: (errno: number, fd: number) => void): void;
  openat2Sync(dirfd: number, path: string, flags: number, mode: number, resolve: number): number;
  supported(): number;
  RESOLVE_NO_XDEV: number;
  RESOLVE_NO_MAGICLINKS: number;
  RESOLVE_NO_SYMLINKS: number;
  RESOLVE_BENEATH: number;
  RESOLVE_IN_ROOT: number;
  O_PATH: number;
}

let loaded: { addon?: ConfineAddon; why?: string } | undefined;

function load(): { addon?: ConfineAddon; why?: string } {
  if (loaded) return loaded;
  if (process.platform !== "linux") return (loaded = { why: "not Linux" });
  const require = createRequire(import.meta.url);
  // dist/sandbox-agent/paths -> dist/native; sandbox-agent/paths (tests on the sources) -> dist/native
  for (const path of ["../../native/confine.node", "../../dist/native/confine.node"]) {
    try {
      return (loaded = { addon: require(path) as ConfineAddon });
    } catch {
      // Not built there.
    }
  }
  return (loaded = { why: "the openat2 addon (dist/native/confine.node) is not built: no C compiler or Node headers at install" });
}

export type Openat2Support = { available: true } | { available: false; reason: string };

/** Whether openat2 can confine here, and if not, why (for /health and the start-up log). */
export function openat2Support(): Openat2Support {
  const { addon, why } = load();
  if (!addon) return { available: false, reason: why! };
  const errno = addon.supported();
  if (errno === 0) return { available: true };
  if (errno === 38) return { available: false, reason: "the kernel has no openat2 (ENOSYS; Linux 5.6 or later needed)" };
  return { available: false, reason: `openat2 is refused here (errno ${errno}; a seccomp filter?)` };
}

function addon(): ConfineAddon {
  const a = load().addon;
  if (!a) throw new Error(`openat2 unavailable: ${load().why}`);
  return a;
}

/** RESOLVE_* and O_PATH as the kernel headers define them (the addon exports them). */
export function resolveFlags() {
  const a = addon();
  return {
    NO_XDEV: a.RESOLVE_NO_XDEV,
    NO_MAGICLINKS: a.RESOLVE_NO_MAGICLINKS,
    NO_SYMLINKS: a.RESOLVE_NO_SYMLINKS,
    BENEATH: a.RESOLVE_BENEATH,
    IN_ROOT: a.RESOLVE_IN_ROOT,
    O_PATH: a.O_PATH,
  };
}

/** Node-style fs error (code, errno, syscall, path) from an errno number. */
function errnoError(errno: number, path: string): NodeJS.ErrnoException {
  const name = errnoName(errno);
  const err = new Error(`${name}: ${errno === 2 ? "no such file or directory" : `errno ${errno}`}, openat2 '${path}'`) as NodeJS.ErrnoException;
  err.code = name;
  err.errno = -errno;
  err.syscall = "openat2";
  err.path = path;
  return err;
}

function errnoName(errno: number): string {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return `E${errno}`;
  }
}

/**
 * openat2(dirfd, path, {flags, mode, resolve}) on libuv's thread pool (a hung mount blocks no
 * request); O_CLOEXEC always. Resolves with the new descriptor, rejects with a Node-style fs error.
 */
export function openat2(dirfd: number, path: string, flags: number, resolve: number, mode = 0): Promise<number> {
  const a = addon();
  return new Promise((ok, fail) => {
    a.openat2(dirfd, path, flags, mode, resolve, (errno, fd) => (errno === 0 ? ok(fd) : fail(errnoError(errno, path))));
  });
}

/** openat2 on the calling thread: throws a Node-style fs error. */
export function openat2Sync(dirfd: number, path: string, flags: number, resolve: number, mode = 0): number {
  return addon().openat2Sync(dirfd, path, flags, mode, resolve);
}

const fstatAsync = promisify(fstat);
const closeAsync = promisify(close);

/** A descriptor the walk holds: the shape of a FileHandle that the walk needs. */
export interface Held {
  readonly fd: number;
  stat(): Promise<Stats>;
  close(): Promise<void>;
}

/** A raw descriptor from openat2, closed once. */
export class RawFd implements Held {
  #closed = false;
  constructor(readonly fd: number) {}
  stat(): Promise<Stats> {
    return fstatAsync(this.fd);
  }
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await closeAsync(this.fd);
  }
}
