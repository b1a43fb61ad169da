import { constants as fsConstants, promises as fsp, type Stats } from "node:fs";
import { errors, fromFsError, isErrno } from "../../src/errors.js";
import type { Walked, WalkOptions } from "./beneath.js";
import { openat2, resolveFlags, RawFd, type Held } from "./openat2.js";

/**
 * The kernel-confined walk: every path is resolved by openat2(2) with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS below a descriptor of the root, so
 * `..` stops at the root, absolute symlinks restart at it (as inside the
 * sandbox, chroot-like) and `/proc/<pid>/...` magic links are refused. The
 * kernel checks every component at the moment it crosses it: a directory
 * swapped for a symlink to `/` mid-request resolves inside the root or not at
 * all. The result is the same `Walked` as the descriptor walk's (beneath.ts):
 * the parent directory held open and the entry's name in it, so directory
 * operations go through `/proc/self/fd/<parent>/<name>`, where the kernel never
 * follows a final symlink for mkdir, unlink, rmdir or rename.
 */
export interface InRoot {
  root: Held;
  /** Whether a directory is one the API may not reach (the agent's own state); undefined: none. */
  hidden?: (dir: Held, stat: Stats) => Promise<boolean>;
}

const MAX_LINKS = 40; // Linux's MAXSYMLINKS, for the links followed here (the final component's)
/** Below PATH_MAX (4096): longer paths are resolved a piece at a time (see openUnderRoot). */
const PIECE_BYTES = 3800;
const MAX_ROUNDS = 200; // a sandbox that keeps undoing our mkdirs gets a 409, not a busy loop

export async function walkInRoot(r: InRoot, sandboxPath: string, options: WalkOptions): Promise<Walked> {
  const F = resolveFlags();
  const IN_ROOT = F.IN_ROOT | F.NO_MAGICLINKS;
  const held: Held[] = [];
  const hold = async (dirfd: number, path: string, flags: number, resolve = IN_ROOT) => {
    const h = new RawFd(await openat2(dirfd, path, flags, resolve));
    held.push(h);
    return h;
  };
  /**
   * A directory or entry by its path from the root. A path longer than the kernel takes (PATH_MAX) is
   * opened a piece at a time; the pieces after the first are resolved RESOLVE_BENEATH the directory
   * the previous piece reached, so a link there that climbs out of that directory or is absolute is
   * refused (403) rather than followed: stricter than the sandbox would be, never looser.
   */
  const openUnderRoot = async (path: string, flags: number) => {
    if (Buffer.byteLength(path) < PIECE_BYTES) return hold(r.root.fd, path, flags);
    const pieces: string[][] = [[]];
    let bytes = 0;
    for (const part of path.split("/").filter((p) => p !== "")) {
      if (bytes + part.length + 1 > PIECE_BYTES && pieces[pieces.length - 1]!.length > 0) {
        pieces.push([]);
        bytes = 0;
      }
      pieces[pieces.length - 1]!.push(part);
      bytes += Buffer.byteLength(part) + 1;
    }
    let dir = await hold(r.root.fd, `/${pieces[0]!.join("/")}`, F.O_PATH | fsConstants.O_DIRECTORY);
    for (let i = 1; i < pieces.length; i++) {
      const last = i === pieces.length - 1;
      dir = await hold(dir.fd, pieces[i]!.join("/"), last ? flags : F.O_PATH | fsConstants.O_DIRECTORY, F.BENEATH | F.NO_MAGICLINKS);
    }
    return dir;
  };
  const closeAll = async () => {
    for (const h of held.splice(0)) await h.close().catch(() => undefined);
  };
  const refuseHidden = async (h: Held, stat: Stats) => {
    if (r.hidden && (await r.hidden(h, stat))) {
      throw errors.forbidden(`${sandboxPath}: the agent's own state is not reachable through the API`);
    }
  };
  const done = (parent: Held, name: string, entry: Held | undefined, stat: Stats | undefined, missingBelow: string[]): Walked => {
    const mine = held.splice(0);
    return {
      parent,
      name,
      entry,
      stat,
      missingBelow,
      close: async () => {
        for (const h of mine) await h.close().catch(() => undefined);
      },
    };
  };

  let path = sandboxPath;
  let links = 0;
  try {
    for (let round = 0; ; round++) {
      if (round > MAX_ROUNDS) throw errors.conflict(`${sandboxPath}: the path kept changing while it was resolved`);
      const parts = path.split("/").filter((s) => s !== "" && s !== ".");
      if (parts.length === 0) return done(r.root, "", r.root, await r.root.stat(), []);
      const name = parts[parts.length - 1]!;
      if (Buffer.byteLength(name) > 255) throw errors.badRequest(`${sandboxPath}: name too long (ENAMETOOLONG)`);
      const dirPath = `/${parts.slice(0, -1).join("/")}`;
      if (name === "..") {
        // A link ending in `..`: the entry is a directory whose name we do not know; it can be read, not replaced.
        const entry = await openUnderRoot(path, F.O_PATH);
        const stat = await entry.stat();
        await refuseHidden(entry, stat);
        return done(entry, "", entry, stat, []);
      }
      let parent: Held;
      try {
        parent = await openUnderRoot(dirPath, F.O_PATH | fsConstants.O_DIRECTORY);
      } catch (err) {
        if (!isErrno(err, "ENOENT")) throw err;
        const found = await deepestExisting(parts.slice(0, -1), [name]);
        if ("restart" in found) {
          await closeAll();
          path = found.restart;
        } else if (found.missing.length === 0) await closeAll();
        else if (!options.createParents) return done(found.dir, found.missing[0]!, undefined, undefined, [...found.missing.slice(1), name]);
        else path = await createMissing(found.dir, found.prefix, parts.slice(found.prefix.length));
        continue;
      }
      await refuseHidden(parent, await parent.stat());
      let entry: Held | undefined;
      try {
        // One name below a held directory, the final symlink itself (O_NOFOLLOW with O_PATH).
        entry = await hold(parent.fd, name, F.O_PATH | fsConstants.O_NOFOLLOW, F.BENEATH | F.NO_SYMLINKS);
      } catch (err) {
        if (!isErrno(err, "ENOENT")) throw err;
        return done(parent, name, undefined, undefined, []);
      }
      const stat = await entry.stat();
      if (stat.isSymbolicLink() && options.follow) {
        if (++links > MAX_LINKS) throw errors.forbidden(`${sandboxPath}: too many levels of symbolic links`);
        const target = await fsp.readlink(`/proc/self/fd/${parent.fd}/${name}`).catch((e: unknown) => {
          if (isErrno(e, "EINVAL", "ENOENT")) return undefined; // no longer a link: look again
          throw e;
        });
        await closeAll();
        // The target is resolved by the kernel next round, from the root: `..` in it climbs from where the link really is.
        if (target !== undefined) path = target.startsWith("/") ? target : `${dirPath}/${target}`;
        continue;
      }
      await refuseHidden(entry, stat);
      return done(parent, name, entry, stat, []);
    }
  } catch (err) {
    await closeAll();
    if (isErrno(err, "ENOTDIR")) throw errors.badRequest(`${sandboxPath}: a parent of the path is not a directory`);
    if (isErrno(err, "EXDEV")) throw errors.forbidden(`${sandboxPath}: a link in a path longer than PATH_MAX leads out of its directory`);
    if (isErrno(err, "ELOOP")) throw errors.forbidden(`${sandboxPath}: too many levels of symbolic links, or a link the sandbox may not follow`);
    throw fromFsError(err, "cannot resolve", sandboxPath);
  }

  /**
   * Where `dirParts` stops existing: the deepest directory that opens, held, and the names missing
   * below it. A dangling link on the way is followed (its target, resolved in the root, is where
   * the missing names would go): then the path to resolve instead.
   */
  async function deepestExisting(dirParts: string[], rest: string[]): Promise<{ dir: Held; prefix: string[]; missing: string[] } | { restart: string }> {
    let dir: Held = r.root;
    for (let i = 0; i < dirParts.length; i++) {
      const prefix = dirParts.slice(0, i + 1);
      try {
        const next = await openUnderRoot(`/${prefix.join("/")}`, F.O_PATH | fsConstants.O_DIRECTORY);
        await refuseHidden(next, await next.stat());
        dir = next;
        continue;
      } catch (err) {
        if (!isErrno(err, "ENOENT")) throw err;
      }
      const name = dirParts[i]!;
      const target = await fsp.readlink(`/proc/self/fd/${dir.fd}/${name}`).catch(() => undefined);
      if (target === undefined) return { dir, prefix: dirParts.slice(0, i), missing: dirParts.slice(i) };
      if (++links > MAX_LINKS) throw errors.forbidden(`${sandboxPath}: too many levels of symbolic links`);
      const base = target.startsWith("/") ? target : `/${[...dirParts.slice(0, i), target].join("/")}`;
      return { restart: [base, ...dirParts.slice(i + 1), ...rest].join("/") };
    }
    return { dir, prefix: dirParts, missing: [] }; // exists now: a race with a mkdir; resolve again
  }

  /** mkdir the first missing directory below `dir` (0755) through its `/proc/self/fd` name (never following a final link); the path to resolve next. */
  async function createMissing(dir: Held, prefix: string[], rest: string[]): Promise<string> {
    await fsp.mkdir(`/proc/self/fd/${dir.fd}/${rest[0]!}`, { mode: 0o755 }).catch((err: unknown) => {
      if (!isErrno(err, "EEXIST")) throw err; // made meanwhile (or a link made meanwhile: the next round follows it)
    });
    await closeAll();
    return `/${[...prefix, ...rest].join("/")}`;
  }
}
