import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import type { Readable } from "node:stream";
import { writeFileAtomic } from "../../src/atomic-file.js";
import { errors, fromFsError, isErrno } from "../../src/errors.js";
import type { Pinned } from "../paths/sandbox-path.js";

/**
 * Writes a file atomically (temp beside it, fsync, rename), in the directory
 * the path resolved to, held open (SandboxPaths.use with createParents):
 * nothing lands outside the root even if a parent is swapped meanwhile.
 * Replacing a file keeps its mode and, when we may, its owner unless a mode
 * is given, as an in-place write would; parent directories are created 0755.
 */
export async function writeFile(target: Pinned, data: string | Readable, mode?: number): Promise<number> {
  const path = target.sandboxPath;
  try {
    const existing = target.stat;
    if (existing?.isDirectory()) throw errors.conflict(`cannot write ${path}: it is a directory`);
    const keepOwner = existing && process.getuid?.() === 0 && (existing.uid !== 0 || existing.gid !== 0);
    return await writeFileAtomic(target.entryPath, data, {
      mode: mode ?? (existing ? existing.mode & 0o7777 : 0o644),
      owner: keepOwner ? { uid: existing.uid, gid: existing.gid } : undefined,
      announce: (tempName) => target.ownWrites.begin(tempName),
    });
  } catch (err) {
    throw fromFsError(err, "cannot write", path);
  }
}

export async function writeDirectory(target: Pinned, mode: number): Promise<void> {
  const path = target.sandboxPath;
  if (target.stat) {
    if (!target.stat.isDirectory()) throw errors.conflict(`cannot create directory ${path}: a file exists there`);
    return;
  }
  await fsp.mkdir(target.entryPath, { mode }).catch((err: unknown) => {
    if (isErrno(err, "EEXIST")) return;
    throw fromFsError(err, "cannot create directory", path);
  });
}

/**
 * mkdir -p of the parent (multipart's complete, which writes by host path).
 * mkdir reports a file in the way as EEXIST, which would read as a conflict
 * on the target itself; it is a bad path instead.
 */
export async function ensureParentDir(host: string, path: string): Promise<void> {
  try {
    await fsp.mkdir(dirname(host), { recursive: true, mode: 0o755 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw errors.badRequest(`${path}: a parent of the path is not a directory`);
    throw err;
  }
}
