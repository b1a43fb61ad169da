import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeSync,
} from "node:fs";
import { execFileSync } from "node:child_process";
import { posix } from "node:path";
import { readTar, type TarEntry } from "./tar-reader.js";

/**
 * Applies one image layer (a tar stream) onto a root filesystem directory,
 * with the OCI whiteouts: `.wh.<name>` deletes <name> from the layers below,
 * `.wh..wh..opq` empties its directory of what the layers below put there.
 *
 * Nothing is ever written outside `root`: an entry whose name has a `..`
 * component is refused, and the directories an entry goes through are
 * resolved as the sandbox will see them (a symbolic link, absolute or
 * relative, is followed inside `root`, never on the host), the way container
 * runtimes resolve paths in a chroot. The entry itself is never followed: an
 * existing symlink in its place is replaced. Devices and fifos are skipped
 * (the launcher gives each sandbox its own /dev).
 *
 * A layer may be applied onto a hard-linked copy of a stored image (a
 * template over its base, base-copy.ts): every file, link or symlink the
 * layer writes is unlinked first and created anew, never written in place,
 * so the base's shared inodes are never changed.
 *
 * With `below`, `root` is itself an overlay layer stacked over those layers
 * (a template stored over its base image: the launcher mounts them as
 * overlayfs lower layers): a deletion is written as the kernel's whiteout (a
 * character device 0/0) instead of being applied, and an opaque directory as
 * a whiteout of every name the layers below have in it (the `*.overlay.opaque`
 * xattr would need trusted.* or the mount's userxattr, and Node sets no
 * xattrs), which overlayfs reads the same way.
 */

export class LayerError extends Error {}

export interface LayerStats {
  files: number;
  bytes: number;
  skipped: number;
}

const WHITEOUT = ".wh.";
const OPAQUE = ".wh..wh..opq";
const MAX_LINKS = 40;
const asRoot = process.getuid?.() === 0;

/** The entry's path as components; refuses `..` (an archive escaping its root). */
export function entryComponents(name: string): string[] {
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw new LayerError(`refused layer entry "${name}": it climbs out of the image root with ".."`);
  return parts;
}

/**
 * Resolves a directory path inside root as a chroot would: every component
 * that is a symlink is replaced by its target (absolute targets start again
 * at root, `..` never climbs above root). Missing directories are created
 * when `create`. Returns the host path, always under root.
 */
export function resolveInRoot(root: string, components: string[], create: boolean): string {
  const done: string[] = [];
  const todo = [...components];
  let links = 0;
  while (todo.length > 0) {
    const part = todo.shift()!;
    if (part === "." || part === "") continue;
    if (part === "..") {
      done.pop();
      continue;
    }
    const host = posix.join(root, ...done, part);
    let st;
    try {
      st = lstatSync(host);
    } catch {
      if (!create) throw new LayerError(`"${posix.join("/", ...done, part)}" does not exist in the image`);
      mkdirSync(host, { mode: 0o755 });
      done.push(part);
      continue;
    }
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) throw new LayerError(`too many symbolic links resolving "/${components.join("/")}" in the image`);
      const target = readlinkSync(host);
      if (target.startsWith("/")) done.length = 0;
      todo.unshift(...target.split("/"));
      continue;
    }
    if (!st.isDirectory()) {
      if (!create) throw new LayerError(`"${posix.join("/", ...done, part)}" is not a directory in the image`);
      // This layer puts something under it: a file of a lower layer becomes a directory.
      rmSync(host, { force: true });
      mkdirSync(host, { mode: 0o755 });
    }
    done.push(part);
  }
  return posix.join(root, ...done);
}

export interface LayerOptions {
  /**
   * "overlay": the tar of an overlayfs upper directory (a Docker overlay2 layer read as it is on disk,
   * builders.ts): a character device 0/0 deletes its name from the layers below, and a directory with the
   * xattr trusted.overlay.opaque (or user.overlay.opaque) = y hides what the layers below put in it —
   * the kernel's overlayfs whiteouts, the same changes the OCI `.wh.` names say. Default "oci".
   */
  whiteouts?: "oci" | "overlay";
  /**
   * The root directories of the layers `root` is stacked over, top first: deletions are kept as overlay
   * whiteouts (see above) instead of being applied. Default: none (root is a whole root filesystem).
   */
  below?: string[];
}

/** The kernel's overlayfs whiteouts: character devices 0/0 (creatable without CAP_MKNOD since Linux 5.8), one mknod process per 500. */
function writeWhiteouts(paths: string[]): void {
  for (const path of paths) rmSync(path, { recursive: true, force: true });
  for (let i = 0; i < paths.length; i += 500) {
    execFileSync("sh", ["-c", 'for p; do mknod -m 0 "$p" c 0 0 || exit 1; done', "whiteouts", ...paths.slice(i, i + 500)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  }
}

export const isWhiteout = (st: { isCharacterDevice(): boolean; rdev: number }) => st.isCharacterDevice() && st.rdev === 0;

const overlayOpaque = (entry: TarEntry) => entry.xattrs?.["trusted.overlay.opaque"] === "y" || entry.xattrs?.["user.overlay.opaque"] === "y";

/** Applies a tar stream as a layer; returns what it wrote. */
export async function applyLayer(root: string, stream: AsyncIterable<Buffer | string>, options: LayerOptions = {}): Promise<LayerStats> {
  const overlay = options.whiteouts === "overlay";
  const below = options.below;
  const stats: LayerStats = { files: 0, bytes: 0, skipped: 0 };
  /** Host paths this layer created: an opaque whiteout keeps them. */
  const created = new Set<string>();
  /** Directory modes and times, set once the layer is complete (a read-only directory must not stop its own children). */
  const dirs: { path: string; entry: TarEntry }[] = [];
  let fd: number | undefined;
  let current: TarEntry | undefined;

  /** Empties a directory of what the layers below put there (an opaque whiteout). */
  const hideBelow = (dir: string) => {
    for (const child of readdirSync(dir)) {
      const path = posix.join(dir, child);
      if (!created.has(path)) rmSync(path, { recursive: true, force: true });
    }
    if (!below) return;
    // Stacked: what the layers underneath have there is hidden by a whiteout of each name (this layer's own entries, later in the stream, replace theirs).
    const relative = posix.relative(root, dir);
    const names = new Set<string>();
    for (const layer of below) {
      try {
        for (const name of readdirSync(posix.join(layer, relative))) names.add(name);
      } catch {
        /* not a directory there */
      }
    }
    writeWhiteouts([...names].map((name) => posix.join(dir, name)).filter((path) => !created.has(path)));
  };

  /** A deletion: applied, or written as a whiteout when root is stacked over other layers. */
  const remove = (path: string) => (below ? writeWhiteouts([path]) : rmSync(path, { recursive: true, force: true }));

  const place = (entry: TarEntry): string | undefined => {
    const parts = entryComponents(entry.path);
    if (parts.length === 0) return undefined; // the root itself
    const name = parts.pop()!;
    const parent = resolveInRoot(root, parts, true);
    if (overlay && entry.type === "char" && entry.devMajor === 0 && entry.devMinor === 0) {
      remove(posix.join(parent, name));
      return undefined;
    }
    if (!overlay && name === OPAQUE) {
      hideBelow(parent);
      return undefined;
    }
    if (!overlay && name.startsWith(WHITEOUT)) {
      remove(posix.join(parent, name.slice(WHITEOUT.length)));
      return undefined;
    }
    return posix.join(parent, name);
  };

  /** Clears the place of a new entry; an existing directory stays when the entry is a directory too. "whiteout": it replaced one (stacked). */
  const clear = (path: string, keepDirectory: boolean): boolean | "whiteout" => {
    let st;
    try {
      st = lstatSync(path);
    } catch {
      return false;
    }
    if (keepDirectory && st.isDirectory()) return true;
    rmSync(path, { recursive: true, force: true });
    return below && isWhiteout(st) ? "whiteout" : false;
  };

  const owner = (entry: TarEntry, path: string, fdOf?: number) => {
    if (!asRoot) return;
    if (fdOf !== undefined) fchownSync(fdOf, entry.uid, entry.gid);
    else lchownSync(path, entry.uid, entry.gid);
  };

  await readTar(stream, {
    entry(entry) {
      current = entry;
      const path = place(entry);
      if (!path) return;
      created.add(path);
      switch (entry.type) {
        case "directory": {
          const was = clear(path, true);
          if (was !== true) mkdirSync(path, { mode: 0o755 });
          // Stacked, a directory made again where a lower layer's was deleted starts empty, as Docker's opaque one.
          if ((was === true || below) && overlay && overlayOpaque(entry)) hideBelow(path);
          else if (was === "whiteout") hideBelow(path);
          owner(entry, path);
          dirs.push({ path, entry });
          return;
        }
        case "file": {
          clear(path, false);
          fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
          owner(entry, path, fd);
          stats.files++;
          return;
        }
        case "symlink":
          clear(path, false);
          symlinkSync(entry.linkTarget, path);
          owner(entry, path);
          try {
            lutimesSync(path, entry.mtimeSec, entry.mtimeSec);
          } catch {
            /* times of a link are cosmetic */
          }
          return;
        case "hardlink": {
          const targetParts = entryComponents(entry.linkTarget);
          const targetName = targetParts.pop();
          if (!targetName) throw new LayerError(`refused hard link "${entry.path}" to the image root`);
          const target = posix.join(resolveInRoot(root, targetParts, false), targetName);
          clear(path, false);
          linkSync(target, path);
          return;
        }
        default:
          stats.skipped++; // devices, fifos: the sandbox's /dev comes from the launcher
      }
    },
    data(chunk) {
      if (fd === undefined) return;
      writeSync(fd, chunk);
      stats.bytes += chunk.length;
    },
    end() {
      if (fd === undefined) return;
      const entry = current!;
      // Set-id bits only when the owner is the one the image says (as root).
      fchmodSync(fd, asRoot ? entry.mode : entry.mode & 0o1777);
      futimesSync(fd, entry.mtimeSec, entry.mtimeSec);
      closeSync(fd);
      fd = undefined;
    },
  }).finally(() => {
    if (fd !== undefined) closeSync(fd);
  });
  // Deepest first, so a read-only parent is set after its children.
  for (const { path, entry } of dirs.reverse()) {
    // Unprivileged, the owner keeps write access: the next layer (or the store's removal) must get in.
    chmodSync(path, asRoot ? entry.mode : entry.mode | 0o700);
    utimesSync(path, entry.mtimeSec, entry.mtimeSec);
  }
  return stats;
}
