import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import type { Readable } from "node:stream";
import { writeFileAtomic } from "../../src/atomic-file.js";
import { errors, fromFsError } from "../../src/errors.js";

/**
 * mkdir -p of the parent. mkdir reports a file in the way as EEXIST, which
 * would read as a conflict on the target itself; it is a bad path instead.
 */
export async function ensureParentDir(host: string, path: string): Promise<void> {
  try {
    await fsp.mkdir(dirname(host), { recursive: true, mode: 0o755 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw errors.badRequest(`${path}: a parent of the path is not a directory`);
    throw err;
  }
}

/**
 * Writes a file atomically (temp beside it, fsync, rename). Replacing a file
 * keeps its mode and, when we may, its owner unless a mode is given, as an
 * in-place write would; parent directories are created 0755.
 */
export async function writeFile(host: string, path: string, data: string | Readable, mode?: number): Promise<number> {
  try {
    const existing = await fsp.stat(host).catch(() => undefined);
    if (existing?.isDirectory()) throw errors.conflict(`cannot write ${path}: it is a directory`);
    await ensureParentDir(host, path);
    const size = await writeFileAtomic(host, data, { mode: mode ?? (existing ? existing.mode & 0o7777 : 0o644) });
    if (existing && process.getuid?.() === 0 && (existing.uid !== 0 || existing.gid !== 0)) {
      await fsp.chown(host, existing.uid, existing.gid).catch(() => undefined);
    }
    return size;
  } catch (err) {
    throw fromFsError(err, "cannot write", path);
  }
}

export async function writeDirectory(host: string, path: string, mode: number): Promise<void> {
  try {
    const existing = await fsp.stat(host).catch(() => undefined);
    if (existing && !existing.isDirectory()) throw errors.conflict(`cannot create directory ${path}: a file exists there`);
    await ensureParentDir(host, path);
    await fsp.mkdir(host, { recursive: true, mode });
  } catch (err) {
    throw fromFsError(err, "cannot create directory", path);
  }
}
