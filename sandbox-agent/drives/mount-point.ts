import { constants, promises as fsp } from "node:fs";
import { posix } from "node:path";
import { ApiError, errors, fromFsError, isErrno } from "../../src/errors.js";
import { fdPath, O_PATH } from "../paths/beneath.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { changed } from "./pinned-mount.js";

/**
 * Prepares the mount point and reports the host path of the topmost
 * directory this call created (undefined when everything existed). A
 * pre-existing directory is used as it is — never chowned, never emptied: the
 * mount only shadows its contents (the reference daemon's anti-takeover rule,
 * sandbox-agent.md §3.2). Directories are made one at a time, each in the
 * held one before it: a parent swapped for a link meanwhile is
 * met as a link, never followed.
 *
 * `directory`: the mount point must be (or become) a directory.
 * `absent`: nothing may exist at the path; only its parents are created.
 */
export async function prepareMountPoint(paths: SandboxPaths, mountPath: string, kind: "directory" | "absent"): Promise<string | undefined> {
  return paths.use(mountPath, { follow: false }, async (p) => {
    if (p.stat?.isSymbolicLink()) throw errors.badRequest(`mountPath: ${mountPath} is a symbolic link; mount on a directory`);
    if (kind === "absent" && p.stat)
      throw errors.conflict(
        `mountPath: ${mountPath} already exists; the symlink drive backend can only attach where nothing exists (it cannot shadow a directory)`,
      );
    if (p.stat) {
      if (!p.stat.isDirectory()) throw errors.badRequest(`mountPath: ${mountPath} exists and is not a directory`);
      return undefined;
    }
    const missing = [p.name, ...p.missingBelow];
    if (kind === "absent") missing.pop();
    return mkdirsIn(p.dir, missing, mountPath);
  });
}

/** mkdir of each name inside the one before, starting in the held directory `dir`; the host path of the first one made. */
async function mkdirsIn(dir: string, names: string[], mountPath: string): Promise<string | undefined> {
  const held: fsp.FileHandle[] = [];
  let created: string | undefined;
  try {
    for (const name of names) {
      const at = `${dir}/${name}`;
      const made = await fsp.mkdir(at, { mode: 0o755 }).then(
        () => true,
        (e: unknown) => {
          if (isErrno(e, "EEXIST")) return false;
          // ENOENT: the held directory was removed (replaced) meanwhile.
          if (isErrno(e, "ENOENT")) throw changed(mountPath);
          throw fromFsError(e, "create mount point", mountPath);
        },
      );
      const handle = await fsp.open(at, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW).catch((e: unknown) => {
        if (isErrno(e, "ENOTDIR", "ELOOP", "ENOENT")) throw changed(mountPath);
        throw e;
      });
      held.push(handle);
      if (made) created ??= await fsp.readlink(fdPath(handle));
      dir = fdPath(handle);
    }
    return created;
  } finally {
    for (const handle of held) await handle.close();
  }
}

/**
 * Removes what prepareMountPoint created, from the mount point up to
 * `createdDir`, stopping at the first directory that is not empty (something
 * was put there since, and it is not ours to delete). Each is removed as a
 * name in its held parent, resolved beneath the root like any API path.
 */
export async function removeCreated(paths: SandboxPaths, hostPath: string, createdDir: string | null | undefined): Promise<void> {
  if (!createdDir) return;
  if (hostPath !== createdDir && !hostPath.startsWith(`${createdDir}/`)) return;
  if (!paths.isInside(createdDir)) return;
  const top = paths.toSandboxPath(createdDir);
  for (let dir = paths.toSandboxPath(hostPath); dir !== "/"; dir = posix.dirname(dir)) {
    try {
      await paths.use(dir, { follow: false }, (p) => fsp.rmdir(p.entryPath));
    } catch (e) {
      // ENOENT: already gone (the symlink backend removed its link); keep climbing.
      if (!isErrno(e, "ENOENT") && !(e instanceof ApiError && e.status === 404)) return;
    }
    if (dir === top) return;
  }
}
