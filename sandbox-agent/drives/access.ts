import { constants, promises as fsp } from "node:fs";
import { errors, isErrno } from "../../src/errors.js";
import { fdPath, O_PATH } from "../paths/beneath.js";

/**
 * Drive permissions (the SDK's DriveSpec.permissions), enforced at mount
 * time when a control plane provisions the drives (--drives-existing-only).
 * The control plane (sandbox-sim) writes, beside the drives:
 *   <drives-dir>/.access/drives/<drive>.json       {"permissions": DrivePermission[]}
 *   <drives-dir>/.access/sandboxes/<sandbox>.json  {"labels": {...}}  (this agent's --sandbox-name)
 * Drive names start with a letter or digit, so `.access` is never a drive.
 * No permissions file, or an empty list: every workload of the workspace may
 * mount the drive (the SDK: "Empty means all workloads ... can access").
 */
export const ACCESS_DIR = ".access";

export interface DrivePermission {
  /** All must match the workload's labels (AND); none matches every workload. */
  labels?: Record<string, unknown>;
  mode?: "read" | "read-write";
  /** Sub-folder the permission covers (default "/": the whole drive). */
  path?: string;
}

/** Whether `drivePath` lies at or under `permitted` (both "/"-rooted). */
function within(drivePath: string, permitted: string): boolean {
  const base = `/${permitted.split("/").filter(Boolean).join("/")}`;
  return base === "/" || drivePath === base || drivePath.startsWith(`${base}/`);
}

function labelsMatch(required: Record<string, unknown> | undefined, labels: Record<string, unknown>): boolean {
  return Object.entries(required ?? {}).every(([k, v]) => Object.hasOwn(labels, k) && String(labels[k]) === String(v));
}

/**
 * Pure decision: the first permission whose labels the workload has and whose
 * path covers the request grants it (OR across permissions); a read-only
 * grant needs `readOnly: true`. Returns why not, or undefined when allowed.
 */
export function driveAccessDenied(
  permissions: readonly DrivePermission[],
  labels: Record<string, unknown>,
  drivePath: string,
  readOnly: boolean,
): string | undefined {
  if (permissions.length === 0) return undefined;
  const matching = permissions.filter((p) => labelsMatch(p.labels, labels) && within(drivePath, p.path ?? "/"));
  if (matching.length === 0) return "no permission of the drive matches this sandbox's labels and drivePath";
  if (readOnly || matching.some((p) => (p.mode ?? "read-write") === "read-write")) return undefined;
  return "the drive grants this sandbox read access only: mount it with readOnly: true";
}

/**
 * A JSON file at `names` below `dir`, each component opened O_NOFOLLOW from the one before: the drives directory is
 * writable from inside sandboxes, and a link planted there must never make the agent read a file outside it.
 */
async function readJson(dir: string, names: readonly string[]): Promise<Record<string, unknown> | undefined> {
  let at = await fsp.open(dir, O_PATH | constants.O_DIRECTORY);
  try {
    for (const name of names.slice(0, -1)) {
      const next = await fsp.open(`${fdPath(at)}/${name}`, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      await at.close();
      at = next;
    }
    const text = await fsp.readFile(`${fdPath(at)}/${names.at(-1)!}`, { encoding: "utf8", flag: constants.O_RDONLY | constants.O_NOFOLLOW });
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw errors.internal(`drive access file ${names.join("/")} is not valid JSON`);
    }
  } catch (e) {
    if (isErrno(e, "ENOENT")) return undefined;
    if (isErrno(e, "ELOOP", "ENOTDIR")) throw errors.forbidden(`driveName: permission denied: ${names.join("/")} is not a plain file in the drives directory`);
    throw e;
  } finally {
    await at.close();
  }
}

/**
 * 403 when the drive's permissions do not let this sandbox mount it so, saying "permission denied" as the
 * platform's refused mount does (the SDK's drive ACL test looks for it). Files are read at each mount (labels change).
 */
export async function checkDriveAccess(drivesDir: string, sandbox: string, driveName: string, drivePath: string, readOnly: boolean): Promise<void> {
  const acl = await readJson(drivesDir, [ACCESS_DIR, "drives", `${driveName}.json`]);
  const permissions = Array.isArray(acl?.permissions) ? (acl.permissions as DrivePermission[]) : [];
  if (permissions.length === 0) return;
  const workload = await readJson(drivesDir, [ACCESS_DIR, "sandboxes", `${sandbox}.json`]);
  const labels = (workload?.labels && typeof workload.labels === "object" ? workload.labels : {}) as Record<string, unknown>;
  const denied = driveAccessDenied(permissions, labels, drivePath, readOnly);
  if (denied) throw errors.forbidden(`driveName: permission denied: drive "${driveName}": ${denied}`);
}
