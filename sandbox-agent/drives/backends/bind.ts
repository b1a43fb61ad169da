import { errors } from "../../../src/errors.js";
import { CHILD_FD, detach, mountOn, unmountTarget, withPathsNamed } from "../pinned-mount.js";
import { describeExit, outputTail, PATH_MOUNT_PROGRAMS, run, type MountPrograms, type RunResult } from "../run.js";
import { openDriveDir } from "./drive-dir.js";
import type { DriveBackend, Mounted, PinnedSpec } from "./types.js";

/**
 * Drive N is the local directory `<drives-dir>/N`, bind-mounted at the mount
 * point (mount(8) --bind) and remounted read-only when asked: a real kernel
 * mount every process in the sandbox sees. Needs CAP_SYS_ADMIN (root, or root
 * of a user namespace that owns the mount namespace). Source and mount point
 * are both held open and handed to mount(8) as descriptors (pinned-mount.ts).
 */
export class BindBackend implements DriveBackend {
  readonly name = "bind" as const;
  readonly mountPoint = "directory" as const;
  readonly supportsReadOnly = true;
  readonly description: string;

  constructor(
    private readonly drivesDir: string,
    private readonly programs: MountPrograms = PATH_MOUNT_PROGRAMS,
  ) {
    this.description = `bind: drives are directories under ${drivesDir}, bind-mounted with mount(8) (${programs.mount.at(-1)})`;
  }

  async mount(spec: PinnedSpec): Promise<Mounted> {
    const dirFd = spec.target.dirFd!;
    const source = await openDriveDir(this.drivesDir, spec.driveName, spec.drivePath);
    let bound: RunResult;
    try {
      bound = await run([...this.programs.mount, "--no-canonicalize", "--bind", CHILD_FD[1], CHILD_FD[0]], { fds: [dirFd, source.fd] });
    } finally {
      await source.close();
    }
    const said = (r: RunResult) =>
      withPathsNamed(outputTail(r), [
        [CHILD_FD[0], spec.hostMountPath],
        [CHILD_FD[1], `<drive ${spec.driveName}>`],
      ]);
    if (bound.code !== 0) throw errors.internal(`Failed to mount drive: mount --bind ${describeExit(bound)}: ${said(bound)}`);
    if (!spec.readOnly) return {};
    // A bind mount starts with its source's flags; read-only is a second,
    // per-mount remount (mount(8) "--bind -o ro" does the same two steps) of
    // the new mount's root, found through the held mount point.
    const mounted = await mountOn(dirFd, spec.target.table);
    if (!mounted) throw errors.internal(`Failed to mount drive: the bind mount is not on the mount point after mounting`);
    try {
      const ro = await run([...this.programs.mount, "--no-canonicalize", "-o", "remount,bind,ro", CHILD_FD[0]], { fds: [mounted.root.fd] });
      if (ro.code !== 0) {
        await detach(mounted.root, this.programs).catch(() => undefined);
        throw errors.internal(`Failed to mount drive: read-only remount ${describeExit(ro)}: ${said(ro)}`);
      }
    } finally {
      await mounted.root.close();
    }
    return {};
  }

  unmount(spec: PinnedSpec, lazy: boolean): Promise<void> {
    return unmountTarget(spec.target, lazy, this.programs);
  }
}
