import { promises as fsp } from "node:fs";
import { ensureDriveDir } from "./drive-dir.js";
import type { DriveBackend, MountSpec, Mounted } from "./types.js";

/**
 * For unprivileged local development only: the mount path becomes a symlink
 * to the drive's directory. Not a mount — it cannot shadow an existing
 * directory, cannot be read-only, and tools that resolve links see the drives
 * dir. Reported as such at start-up and in every list entry (`backend`).
 */
export class SymlinkBackend implements DriveBackend {
  readonly name = "symlink" as const;
  readonly mountPoint = "absent" as const;
  readonly supportsReadOnly = false;
  readonly description: string;

  constructor(private readonly drivesDir: string) {
    this.description = `symlink (local development only): mount paths become symlinks into ${drivesDir}; not real mounts, read-only refused`;
  }

  async mount(spec: MountSpec): Promise<Mounted> {
    const target = await ensureDriveDir(this.drivesDir, spec.driveName, spec.drivePath);
    await fsp.symlink(target, spec.hostMountPath, "dir");
    return { linkTarget: target };
  }

  async unmount(spec: MountSpec): Promise<void> {
    const stat = await fsp.lstat(spec.hostMountPath).catch(() => undefined);
    if (stat?.isSymbolicLink()) await fsp.unlink(spec.hostMountPath);
  }
}
