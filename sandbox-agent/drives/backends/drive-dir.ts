import { promises as fsp } from "node:fs";
import { join } from "node:path";
import { errors, fromFsError, isErrno } from "../../../src/errors.js";

/**
 * The local directory of a drive and sub-path (`<drives-dir>/<name><drivePath>`),
 * created one component at a time. A symlink anywhere inside the drive is
 * refused: drives are shared, and a link planted by one sandbox must not make
 * another agent bind-mount a directory outside the drive (such as /etc).
 */
export async function ensureDriveDir(drivesDir: string, driveName: string, drivePath: string): Promise<string> {
  await fsp.mkdir(drivesDir, { recursive: true, mode: 0o755 });
  let dir = drivesDir;
  for (const segment of [driveName, ...drivePath.split("/").filter((s) => s !== "")]) {
    dir = join(dir, segment);
    const shown = `${driveName}${dir.slice(join(drivesDir, driveName).length) || "/"}`;
    let stat = await fsp.lstat(dir).catch((e: unknown) => (isErrno(e, "ENOENT") ? undefined : Promise.reject(e)));
    if (!stat) {
      await fsp.mkdir(dir, { mode: 0o755 }).catch((e: unknown) => (isErrno(e, "EEXIST") ? undefined : Promise.reject(fromFsError(e, "create drive directory", shown))));
      stat = await fsp.lstat(dir);
    }
    if (stat.isSymbolicLink()) throw errors.badRequest(`drivePath: ${shown} is a symbolic link inside the drive; drives may not be mounted through links`);
    if (!stat.isDirectory()) throw errors.badRequest(`drivePath: ${shown} is not a directory`);
  }
  return dir;
}
