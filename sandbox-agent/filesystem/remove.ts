import { promises as fsp } from "node:fs";
import { errors, fromFsError } from "../../src/errors.js";

/**
 * Deletes a directory; without `recursive` only an empty one. A non-empty
 * directory answers what the reference daemon answers there: 422
 * `error deleting directory: ... directory not empty`.
 */
export async function removeDirectory(host: string, path: string, recursive: boolean): Promise<void> {
  if (recursive) {
    await fsp.rm(host, { recursive: true, force: true }).catch((err) => { throw fromFsError(err, "cannot delete", path); });
    return;
  }
  await fsp.rmdir(host).catch((err) => {
    if ((err as NodeJS.ErrnoException).code === "ENOTEMPTY") {
      throw errors.unprocessable(`error deleting directory: ${path}: directory not empty (pass recursive=true)`);
    }
    throw fromFsError(err, "cannot delete", path);
  });
}
