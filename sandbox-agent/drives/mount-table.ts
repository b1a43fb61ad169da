import { promises as fsp } from "node:fs";
import { isErrno } from "../../src/errors.js";

/**
 * The kernel's mount table, read from /proc/self/mountinfo (proc(5)): the
 * ground truth for what is mounted, whatever the agent remembers.
 *
 *   36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
 *   (1)(2) (3)   (4)   (5)        (6)       (7)     (8) (9)  (10)      (11)
 *
 * Fields 4, 5 and 10 escape space, tab, newline and backslash as octal
 * (`\040`, `\011`, `\012`, `\134`); optional fields (7) run up to the `-`.
 */
export interface MountEntry {
  mountId: number;
  parentId: number;
  /** `major:minor` of the filesystem. */
  device: string;
  /** The directory of that filesystem mounted here (a bind mount's source). */
  root: string;
  mountPoint: string;
  /** Per-mount options (`ro`/`rw`, ...). */
  options: string[];
  fsType: string;
  source: string;
  superOptions: string[];
  readOnly: boolean;
}

export const MOUNTINFO = "/proc/self/mountinfo";

export function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Parses mountinfo text; malformed lines are skipped rather than failing the whole table. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const fields = line.split(" ");
    const dash = fields.indexOf("-", 6);
    if (dash < 0 || fields.length < dash + 3) continue;
    const mountId = Number(fields[0]);
    const parentId = Number(fields[1]);
    if (!Number.isInteger(mountId) || !Number.isInteger(parentId)) continue;
    const options = fields[5]!.split(",");
    entries.push({
      mountId,
      parentId,
      device: fields[2]!,
      root: unescapeMountField(fields[3]!),
      mountPoint: unescapeMountField(fields[4]!),
      options,
      fsType: unescapeMountField(fields[dash + 1]!),
      source: unescapeMountField(fields[dash + 2]!),
      superOptions: (fields[dash + 3] ?? "").split(","),
      readOnly: options.includes("ro"),
    });
  }
  return entries;
}

/**
 * Without procfs (macOS, where only the symlink backend can run) there is no
 * table and so no kernel mount to report: an empty one, not a failure.
 */
export async function readMountTable(file = MOUNTINFO): Promise<MountEntry[]> {
  try {
    return parseMountInfo(await fsp.readFile(file, "utf8"));
  } catch (e) {
    if (isErrno(e, "ENOENT")) return [];
    throw e;
  }
}

/**
 * The mount visible at a path: when several are stacked on one mount point,
 * the last one in the table is on top.
 */
export function topMountAt(table: readonly MountEntry[], mountPoint: string): MountEntry | undefined {
  for (let i = table.length - 1; i >= 0; i--) if (table[i]!.mountPoint === mountPoint) return table[i];
  return undefined;
}
