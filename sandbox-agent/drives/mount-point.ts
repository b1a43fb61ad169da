import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import { errors, fromFsError, isErrno } from "../../src/errors.js";

/**
 * Prepares the mount point and reports the topmost directory this call
 * created (undefined when everything existed). A pre-existing directory is
 * used as it is — never chowned, never emptied: the mount only shadows its
 * contents (the reference daemon's anti-takeover rule, sandbox-agent.md §3.2).
 *
 * `directory`: the mount point must be (or become) a directory.
 * `absent`: nothing may exist at the path; only its parents are created.
 */
export async function prepareMountPoint(hostPath: string, kind: "directory" | "absent", mountPath: string): Promise<string | undefined> {
  const stat = await fsp.lstat(hostPath).catch((e: unknown) => {
    if (isErrno(e, "ENOENT")) return undefined;
    throw fromFsError(e, "inspect mount point", mountPath);
  });
  if (stat?.isSymbolicLink()) throw errors.badRequest(`mountPath: ${mountPath} is a symbolic link; mount on a directory`);
  if (kind === "absent") {
    if (stat) throw errors.conflict(`mountPath: ${mountPath} already exists; the symlink drive backend can only attach where nothing exists (it cannot shadow a directory)`);
    return mkdirs(dirname(hostPath), mountPath);
  }
  if (stat) {
    if (!stat.isDirectory()) throw errors.badRequest(`mountPath: ${mountPath} exists and is not a directory`);
    return undefined;
  }
  return mkdirs(hostPath, mountPath);
}

async function mkdirs(hostPath: string, mountPath: string): Promise<string | undefined> {
  try {
    return await fsp.mkdir(hostPath, { recursive: true, mode: 0o755 });
  } catch (e) {
    throw fromFsError(e, "create mount point", mountPath);
  }
}

/**
 * Removes what prepareMountPoint created, from the mount point up to
 * `createdDir`, stopping at the first directory that is not empty (something
 * was put there since, and it is not ours to delete).
 */
export async function removeCreated(hostPath: string, createdDir: string | null | undefined): Promise<void> {
  if (!createdDir) return;
  if (hostPath !== createdDir && !hostPath.startsWith(`${createdDir}/`)) return;
  for (let dir = hostPath; ; dir = dirname(dir)) {
    try {
      await fsp.rmdir(dir);
    } catch (e) {
      // ENOENT: already gone (the symlink backend removed its link); keep climbing.
      if (!isErrno(e, "ENOENT")) return;
    }
    if (dir === createdDir || dir === dirname(dir)) return;
  }
}
