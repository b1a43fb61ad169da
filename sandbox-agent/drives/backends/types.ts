import type { MountTarget } from "../pinned-mount.js";

export type BackendName = "bind" | "command" | "symlink";
export const BACKEND_NAMES: readonly BackendName[] = ["bind", "command", "symlink"];

/** What a backend is asked to attach, with the mount point as a host path. */
export interface MountSpec {
  driveName: string;
  /** Normalized: leading `/`, no trailing `/`. */
  drivePath: string;
  readOnly: boolean;
  hostMountPath: string;
}

/** A MountSpec with its mount point held open for the call (pinned-mount.ts): attach and detach there, never at the path string. */
export interface PinnedSpec extends MountSpec {
  target: MountTarget;
}

export interface Mounted {
  /** Set by backends that attach a symlink instead of a kernel mount. */
  linkTarget?: string;
}

/**
 * One way of attaching drives. Backends do the attaching only; validation,
 * locking, mount-point creation and bookkeeping live in DriveService.
 */
export interface DriveBackend {
  readonly name: BackendName;
  /** One line for the start-up log and the README. */
  readonly description: string;
  /**
   * `directory`: the service prepares a directory and the backend mounts on it
   * (a kernel mount that shows in the mount table). `absent`: the path must
   * not exist and the backend creates the entry itself.
   */
  readonly mountPoint: "directory" | "absent";
  readonly supportsReadOnly: boolean;
  /** Throws an ApiError (500) when the mount fails; leaves nothing mounted. `directory` backends get `target.dirFd`. */
  mount(spec: PinnedSpec): Promise<Mounted>;
  /** Throws DriveBusyError when the kernel refuses because the mount is in use. */
  unmount(spec: PinnedSpec, lazy: boolean): Promise<void>;
}
