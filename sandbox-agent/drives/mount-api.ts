import { realpathSync } from "node:fs";
import type { Clock } from "../../src/clock.js";
import { ApiError, errors } from "../../src/errors.js";
import type { Logger } from "../../src/logging.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import type { BackendName, DriveBackend, MountSpec } from "./backends/types.js";
import type { MountEntry } from "./mount-table.js";
import type { MountPrograms } from "./run.js";
import type { DriveRecord, DriveStore } from "./drive-store.js";

/**
 * The drive service's shapes (service.ts): what a mount asks, what a mounted drive reads as, what the service is
 * built from; and the pure helpers between those and the agent's records (a record's identity and spec, a
 * confinement refusal read as a bad mount path).
 */

export interface MountRequest {
  driveName: string;
  mountPath: string;
  drivePath?: string;
  readOnly?: boolean;
}

export interface DriveMountInfo {
  driveName: string;
  mountPath: string;
  drivePath: string;
  readOnly: boolean;
  backend: BackendName;
}

export interface DriveServiceOptions {
  backend: DriveBackend;
  store: DriveStore;
  paths: SandboxPaths;
  drivesDir: string;
  /** Refuse drives whose directory under drivesDir does not exist (--drives-existing-only). */
  existingOnly?: boolean;
  /** This sandbox's name: with existingOnly, its labels and the drive's permissions decide a mount (access.ts). */
  sandboxName?: string;
  dataDir: string;
  clock: Clock;
  logger: Logger;
  readTable?: () => Promise<MountEntry[]>;
  /** umount(8) for undoing a misplaced mount (default: the one on PATH). */
  programs?: MountPrograms;
}

/** A path refused by the confinement (403) is a bad mount path (400): outside the root, or over the agent's own state. */
export function asMountPathError(e: unknown, mountPath: string): unknown {
  if (!(e instanceof ApiError) || e.status !== 403) return e;
  if (e.message.includes("agent's own state")) return errors.badRequest(`mountPath: ${mountPath} overlaps the agent's data directory or drives directory`);
  return errors.badRequest(`mountPath: ${mountPath} resolves outside the sandbox root`);
}

/** One mount's identity: a path reused by a later mount is a different record. */
export function recordKey(record: DriveRecord): string {
  return `${record.hostPath}\0${record.mountedAt}\0${record.mountId}\0${record.linkTarget}`;
}

export function specOf(record: DriveRecord): MountSpec {
  return { driveName: record.driveName, drivePath: record.drivePath, readOnly: record.readOnly, hostMountPath: record.hostPath };
}

export function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
