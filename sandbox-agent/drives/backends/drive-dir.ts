import { constants, promises as fsp } from "node:fs";
import { join } from "node:path";
import { errors, fromFsError, isErrno } from "../../../src/errors.js";
import { fdPath, O_PATH } from "../../paths/beneath.js";

const OPEN_DIR = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * The local directory of a drive and sub-path (`<drives-dir>/<name><drivePath>`),
 * created and opened one component at a time, each O_NOFOLLOW from the one
 * before: held open, it is what a bind mount takes as its source. A symlink
 * anywhere inside the drive is refused: drives are shared, and a link planted
 * by one sandbox must not make another agent bind-mount a directory outside
 * the drive (such as /etc), even if planted between a check and the mount.
 */
export async function openDriveDir(drivesDir: string, driveName: string, drivePath: string): Promise<fsp.FileHandle> {
  await fsp.mkdir(drivesDir, { recursive: true, mode: 0o755 });
  let dir = await fsp.open(drivesDir, O_PATH | constants.O_DIRECTORY);
  const below = drivePath.split("/").filter((s) => s !== "");
  try {
    for (let i = -1; i < below.length; i++) {
      const segment = i < 0 ? driveName : below[i]!;
      const shown = `${driveName}/${below.slice(0, i + 1).join("/")}`;
      const at = `${fdPath(dir)}/${segment}`;
      await fsp.mkdir(at, { mode: 0o755 }).catch((e: unknown) => {
        if (!isErrno(e, "EEXIST")) throw fromFsError(e, "create drive directory", shown);
      });
      const next = await fsp.open(at, OPEN_DIR).catch(async (e: unknown) => {
        if (!isErrno(e, "ENOTDIR", "ELOOP")) throw e;
        const stat = await fsp.lstat(at).catch(() => undefined);
        if (stat?.isSymbolicLink()) throw errors.badRequest(`drivePath: ${shown} is a symbolic link inside the drive; drives may not be mounted through links`);
        throw errors.badRequest(`drivePath: ${shown} is not a directory`);
      });
      await dir.close();
      dir = next;
    }
    return dir;
  } catch (e) {
    await dir.close();
    throw e;
  }
}

/** The drive directory's path (a symlink drive points there), after the same checks. */
export async function ensureDriveDir(drivesDir: string, driveName: string, drivePath: string): Promise<string> {
  await (await openDriveDir(drivesDir, driveName, drivePath)).close();
  return join(drivesDir, driveName, ...drivePath.split("/").filter((s) => s !== ""));
}
