import { promises as fsp } from "node:fs";
import { errors, isErrno } from "../../../src/errors.js";
import { changed } from "../pinned-mount.js";
import { ensureDriveDir } from "./drive-dir.js";
import type { DriveBackend, Mounted, PinnedSpec } from "./types.js";

/**
 * For unprivileged local development only: the mount path becomes a symlink
 * to the drive's directory. Not a mount — it cannot shadow an existing
 * directory, cannot be read-only, and tools that resolve links see the drives
 * dir. Reported as such at start-up and in every list entry (`backend`).
 * The link is made and removed in the held parent directory (pinned-mount.ts),
 * never through a path a swapped parent could redirect.
 */
export class SymlinkBackend implements DriveBackend {
  readonly name = "symlink" as const;
  readonly mountPoint = "absent" as const;
  readonly supportsReadOnly = false;
  readonly description: string;

  constructor(private readonly drivesDir: string) {
    this.description = `symlink (local development only): mount paths become symlinks into ${drivesDir}; not real mounts, read-only refused`;
  }

  async mount(spec: PinnedSpec): Promise<Mounted> {
    const target = await ensureDriveDir(this.drivesDir, spec.driveName, spec.drivePath);
    await fsp.symlink(target, entryOf(spec), "dir").catch((e: unknown) => {
      if (isErrno(e, "EEXIST"))
        throw errors.conflict(
          `mountPath: ${spec.hostMountPath} already exists; the symlink drive backend can only attach where nothing exists (it cannot shadow a directory)`,
        );
      // The held parent was removed (replaced by another directory) since it was checked.
      if (isErrno(e, "ENOENT")) throw changed(spec.hostMountPath);
      throw e;
    });
    return { linkTarget: target };
  }

  async unmount(spec: PinnedSpec): Promise<void> {
    const entry = entryOf(spec);
    const stat = await fsp.lstat(entry).catch(() => undefined);
    if (stat?.isSymbolicLink()) await fsp.unlink(entry);
  }
}

/** The mount point as a name in its held parent: symlink(2), lstat(2) and unlink(2) never follow a final link. */
function entryOf(spec: PinnedSpec): string {
  return `/proc/self/fd/${spec.target.parentFd}/${spec.target.name}`;
}
