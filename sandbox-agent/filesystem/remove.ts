import { constants, promises as fsp } from "node:fs";
import { errors, fromFsError, isErrno } from "../../src/errors.js";
import { fdPath } from "../paths/sandbox-path.js";

/** A directory entry as `SandboxPaths.use` pins it: its parent held open, and its name there. */
export interface HeldEntry {
  /** `/proc/self/fd/N` of the parent directory. */
  dir: string;
  name: string;
}

/**
 * Deletes a directory; without `recursive` only an empty one. A non-empty
 * directory answers what the reference daemon answers there: 422
 * `error deleting directory: ... directory not empty`.
 */
export async function removeDirectory(entry: HeldEntry, path: string, recursive: boolean): Promise<void> {
  if (recursive) {
    await removeTree(entry.dir, entry.name).catch((err) => {
      throw fromFsError(err, "cannot delete", path);
    });
    return;
  }
  await fsp.rmdir(`${entry.dir}/${entry.name}`).catch((err) => {
    if ((err as NodeJS.ErrnoException).code === "ENOTEMPTY") {
      throw errors.unprocessable(`error deleting directory: ${path}: directory not empty (pass recursive=true)`);
    }
    throw fromFsError(err, "cannot delete", path);
  });
}

/** Files unlinked at once in one directory (fs.rm runs a directory's children concurrently too). */
const UNLINK_BATCH = 64;
/** An entry that keeps changing kind under us (a process swapping it) is given up on after this many tries. */
const MAX_SWAPS = 8;
const OPEN_DIR = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * `rm -r` of `name` in the held directory `dir`, one directory descriptor per
 * level: each directory is opened with O_NOFOLLOW relative to
 * its parent's descriptor and listed and emptied through that descriptor, so
 * a directory swapped for a symlink mid-walk is met as the link itself (and
 * unlinked), never followed. fs.rm re-resolves `a/b/c` strings at every step,
 * so a swapped `b` would lead it outside the root.
 */
async function removeTree(dir: string, name: string, swaps = 0): Promise<void> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(`${dir}/${name}`, OPEN_DIR);
  } catch (err) {
    if (isErrno(err, "ENOENT")) return;
    // A file or a symlink now (ELOOP: O_NOFOLLOW met a link): the entry itself goes.
    if (isErrno(err, "ENOTDIR", "ELOOP") && swaps < MAX_SWAPS) return unlinkEntry(dir, name, swaps + 1);
    throw err;
  }
  try {
    const here = fdPath(handle);
    const files: string[] = [];
    for (const child of await fsp.readdir(here, { withFileTypes: true })) {
      if (child.isDirectory()) await removeTree(here, child.name);
      else files.push(child.name);
    }
    for (let i = 0; i < files.length; i += UNLINK_BATCH) {
      await Promise.all(files.slice(i, i + UNLINK_BATCH).map((file) => unlinkEntry(here, file)));
    }
  } finally {
    await handle.close();
  }
  await fsp.rmdir(`${dir}/${name}`).catch((err: unknown) => {
    if (!isErrno(err, "ENOENT")) throw err;
  });
}

/** unlink(2) never follows the final name: a symlink is removed, not its target. */
async function unlinkEntry(dir: string, name: string, swaps = 0): Promise<void> {
  try {
    await fsp.unlink(`${dir}/${name}`);
  } catch (err) {
    if (isErrno(err, "ENOENT")) return;
    // A directory now (Linux answers EISDIR, POSIX allows EPERM).
    if (isErrno(err, "EISDIR", "EPERM") && swaps < MAX_SWAPS) return removeTree(dir, name, swaps + 1);
    throw err;
  }
}
