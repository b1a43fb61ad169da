import { errors } from "../../../src/errors.js";
import { describeExit, outputTail, run } from "../run.js";
import { ensureDriveDir } from "./drive-dir.js";
import { DriveBusyError, type DriveBackend, type MountSpec, type Mounted } from "./types.js";

/**
 * Drive N is the local directory `<drives-dir>/N`, bind-mounted at the mount
 * point (mount(8) --bind) and remounted read-only when asked: a real kernel
 * mount every process in the sandbox sees. Needs CAP_SYS_ADMIN.
 */
export class BindBackend implements DriveBackend {
  readonly name = "bind" as const;
  readonly mountPoint = "directory" as const;
  readonly supportsReadOnly = true;
  readonly description: string;

  constructor(private readonly drivesDir: string) {
    this.description = `bind: drives are directories under ${drivesDir}, bind-mounted with mount(8)`;
  }

  async mount(spec: MountSpec): Promise<Mounted> {
    const source = await ensureDriveDir(this.drivesDir, spec.driveName, spec.drivePath);
    const bound = await run(["mount", "--bind", source, spec.hostMountPath]);
    if (bound.code !== 0) throw errors.internal(`Failed to mount drive: mount --bind ${describeExit(bound)}: ${outputTail(bound)}`);
    if (spec.readOnly) {
      // A bind mount starts with its source's flags; read-only is a second,
      // per-mount remount (mount(8) "--bind -o ro" does the same two steps).
      const ro = await run(["mount", "-o", "remount,bind,ro", spec.hostMountPath]);
      if (ro.code !== 0) {
        await run(["umount", spec.hostMountPath]);
        throw errors.internal(`Failed to mount drive: read-only remount ${describeExit(ro)}: ${outputTail(ro)}`);
      }
    }
    return {};
  }

  unmount(spec: MountSpec, lazy: boolean): Promise<void> {
    return umount(spec.hostMountPath, lazy);
  }
}

/** umount(8), or `umount -l` (detach now, clean up when no longer busy). */
export async function umount(hostPath: string, lazy: boolean): Promise<void> {
  const result = await run(lazy ? ["umount", "-l", hostPath] : ["umount", hostPath]);
  if (result.code === 0) return;
  const tail = outputTail(result);
  if (/busy/i.test(tail)) throw new DriveBusyError(tail);
  throw errors.internal(`Failed to unmount drive: umount ${describeExit(result)}: ${tail}`);
}
