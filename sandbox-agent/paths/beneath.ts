import { constants, promises as fsp, type Stats } from "node:fs";
import { posix } from "node:path";
import { errors, fromFsError, isErrno } from "../../src/errors.js";
import type { Held } from "./openat2.js";

/**
 * openat(2) without a native binding: every component is opened with
 * O_PATH|O_NOFOLLOW relative to the directory before it, through that
 * directory's `/proc/self/fd/<n>` magic link. The kernel resolves the magic
 * link to the very inode we hold open, so swapping a directory for a symlink
 * after we looked at it changes nothing: we never resolve a path string twice.
 * Symlinks are read and followed by hand, `..` pops our own stack, and an
 * absolute target is re-rooted lexically — the walk cannot leave the root.
 */
export const O_PATH = 0o10000000; // Linux (x86-64, arm64): not exported by node:fs

/** The `/proc/self/fd/<n>` spelling of an open descriptor, usable wherever a path is. */
export function fdPath(handle: { readonly fd: number }): string {
  return `/proc/self/fd/${handle.fd}`;
}

export const MAX_LINKS = 40; // Linux's MAXSYMLINKS

export interface WalkOptions {
  /** Follow a final symlink (read, write through it) or stop at the entry itself (delete, lstat). */
  follow: boolean;
  /** mkdir missing directories on the way (mode 0755); the final component is never created. */
  createParents?: boolean;
}

/** Where a walk ended: an open parent directory and a name in it. The caller closes it. */
export interface Walked {
  /** The parent, held open (O_PATH); the root's own handle when the entry is at the top (never closed by close()). */
  parent: Held;
  /** The entry's name in `parent`; "" when the path is the root itself. */
  name: string;
  /** The entry held open (O_PATH), when it exists; a symlink itself when `follow` was false. */
  entry?: Held;
  /** lstat of `entry`. */
  stat?: Stats;
  /** Components below a missing directory (without createParents): `name` is missing, these hang below it. */
  missingBelow: string[];
  close(): Promise<void>;
}

export interface Beneath {
  root: fsp.FileHandle;
  /** The root's host path, symlinks resolved ("/" allowed). */
  hostRoot: string;
  /** dev:ino of directories the API may not enter (the agent's own state). */
  hidden: ReadonlySet<string>;
}

export function inodeKey(stat: { dev: number | bigint; ino: number | bigint }): string {
  return `${stat.dev}:${stat.ino}`;
}

/** Splits a link target or sandbox path into components. */
function components(path: string): string[] {
  return path.split("/").filter((s) => s !== "" && s !== ".");
}

/**
 * Walks `sandboxPath` (normalized, absolute) beneath `b.root`. Throws ApiErrors:
 * 403 outside the root, through a hidden directory or too many links; 400 for
 * a name too long or a file where a directory should be; 404 never (a missing
 * component is reported in the result).
 */
export async function walkBeneath(b: Beneath, sandboxPath: string, options: WalkOptions): Promise<Walked> {
  const stack: fsp.FileHandle[] = [];
  const current = () => stack[stack.length - 1] ?? b.root;
  const closeAll = async () => {
    for (const h of stack.splice(0)) await h.close().catch(() => undefined);
  };
  const queue = components(sandboxPath);
  let links = 0;
  const outside = () => errors.forbidden(`${sandboxPath} resolves outside the sandbox root`);
  try {
    while (queue.length > 0) {
      const segment = queue.shift()!;
      if (segment === "..") {
        if (stack.length > 0) await stack.pop()!.close();
        else if (b.hostRoot !== "/") throw outside();
        continue;
      }
      const last = queue.length === 0;
      const dir = current();
      if (last && !options.follow) return await finish(dir, segment, await openEntry(dir, segment, sandboxPath), []);
      let entry = await openEntry(dir, segment, sandboxPath);
      if (!entry && !last && options.createParents) {
        await fsp.mkdir(`${fdPath(dir)}/${segment}`, { mode: 0o755 }).catch((e: unknown) => {
          if (!isErrno(e, "EEXIST")) throw e;
        });
        entry = await openEntry(dir, segment, sandboxPath);
      }
      if (!entry) return await finish(dir, segment, undefined, queue.splice(0));
      if (entry.stat.isSymbolicLink()) {
        await entry.handle.close();
        if (++links > MAX_LINKS) throw errors.forbidden(`${sandboxPath}: too many levels of symbolic links`);
        const target = await fsp.readlink(`${fdPath(dir)}/${segment}`).catch((e: unknown) => {
          // No longer a link (EINVAL) or gone (ENOENT) since it was opened: look at the name again.
          if (isErrno(e, "EINVAL", "ENOENT")) return undefined;
          throw e;
        });
        if (target === undefined) {
          queue.unshift(segment);
          continue;
        }
        if (target.startsWith("/")) {
          const rel = reRoot(b.hostRoot, target);
          if (rel === undefined) throw outside();
          await closeAll();
          queue.unshift(...components(rel));
        } else queue.unshift(...components(target));
        continue;
      }
      if (b.hidden.has(inodeKey(entry.stat))) {
        await entry.handle.close();
        throw errors.forbidden(`${sandboxPath}: the agent's own state is not reachable through the API`);
      }
      if (last) return await finish(dir, segment, entry, []);
      if (!entry.stat.isDirectory()) {
        await entry.handle.close();
        throw errors.badRequest(`${sandboxPath}: a parent of the path is not a directory`);
      }
      stack.push(entry.handle);
    }
    // The root itself.
    return { parent: b.root, name: "", entry: b.root, stat: await b.root.stat(), missingBelow: [], close: closeAll };
  } catch (err) {
    await closeAll();
    throw fromFsError(err, "cannot resolve", sandboxPath);
  }

  async function finish(
    dir: fsp.FileHandle,
    name: string,
    entry: { handle: fsp.FileHandle; stat: Stats } | undefined,
    missingBelow: string[],
  ): Promise<Walked> {
    if (entry && b.hidden.has(inodeKey(entry.stat))) {
      await entry.handle.close();
      throw errors.forbidden(`${sandboxPath}: the agent's own state is not reachable through the API`);
    }
    const held = stack.splice(0);
    const close = async () => {
      await entry?.handle.close().catch(() => undefined);
      for (const h of held) await h.close().catch(() => undefined);
    };
    return { parent: dir, name, entry: entry?.handle, stat: entry?.stat, missingBelow, close };
  }
}

async function openEntry(dir: fsp.FileHandle, name: string, sandboxPath: string): Promise<{ handle: fsp.FileHandle; stat: Stats } | undefined> {
  if (Buffer.byteLength(name) > 255) throw errors.badRequest(`${sandboxPath}: name too long (ENAMETOOLONG)`);
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(`${fdPath(dir)}/${name}`, O_PATH | constants.O_NOFOLLOW);
  } catch (err) {
    if (isErrno(err, "ENOENT")) return undefined;
    throw err;
  }
  try {
    return { handle, stat: await handle.stat() };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** An absolute link target as a path under the root, or undefined when it points outside. */
function reRoot(hostRoot: string, target: string): string | undefined {
  const normalized = posix.normalize(target);
  if (hostRoot === "/") return normalized;
  if (normalized === hostRoot) return "/";
  return normalized.startsWith(`${hostRoot}/`) ? normalized.slice(hostRoot.length) : undefined;
}
