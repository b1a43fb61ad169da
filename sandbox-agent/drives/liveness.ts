import { promises as fsp } from "node:fs";
import { topMountAt, type MountEntry } from "./mount-table.js";
import type { DriveRecord } from "./drive-store.js";

/**
 * Where a recorded drive is, from the kernel's mount table (the ground truth):
 * - `live`: the very mount the agent made (same kernel mount id and device, or
 *   the same symlink) is on top of its path;
 * - `moved`: that mount still exists, elsewhere: a process of the sandbox
 *   renamed a directory above it (a mount point itself cannot be renamed).
 *   Kept, listed and unmounted where it is now (a directory
 *   swapped mid-request never leaves a mount the agent lost track of);
 * - `gone`: unmounted behind the agent's back, to be forgotten.
 */
export interface Placed {
  record: DriveRecord;
  state: "live" | "moved" | "gone";
  /** The host path the drive is at now (not when gone). */
  now?: string;
  /** Its mount table entry (kernel mounts, not when gone). */
  entry?: MountEntry;
}

export async function place(record: DriveRecord, table: readonly MountEntry[]): Promise<Placed> {
  if (record.linkTarget !== null) {
    const target = await fsp.readlink(record.hostPath).catch(() => undefined);
    return target === record.linkTarget ? { record, state: "live", now: record.hostPath } : { record, state: "gone" };
  }
  const ours = (m: MountEntry) => m.mountId === record.mountId && m.device === record.device;
  const top = topMountAt(table, record.hostPath);
  if (top && ours(top)) return { record, state: "live", now: record.hostPath, entry: top };
  const entry = table.find(ours);
  return entry ? { record, state: "moved", now: entry.mountPoint, entry } : { record, state: "gone" };
}

/** The drive on top of `hostPath` now, whichever path it was recorded under. */
export function driveAt(placed: readonly Placed[], hostPath: string, table: readonly MountEntry[]): Placed | undefined {
  const live = placed.find((p) => p.state === "live" && p.now === hostPath);
  if (live) return live;
  const top = topMountAt(table, hostPath);
  return top && placed.find((p) => p.state === "moved" && p.entry?.mountId === top.mountId && p.entry.device === top.device);
}
