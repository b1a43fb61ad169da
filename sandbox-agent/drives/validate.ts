import { errors } from "../../src/errors.js";

/**
 * Pure input rules for drive requests. Each violation is a 400 naming the
 * field. Limits follow the reference daemon (src/handler/drive/validation.go:
 * names ≤128 of [a-zA-Z0-9_-] not starting with - or _, paths ≤512, no `..`).
 */

const DRIVE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$/;
const MAX_PATH = 512;

/**
 * Sandbox directories a drive may never cover: mounting over them would break
 * the sandbox's own system (or hide /proc from the agent reading its mount
 * table). Anything inside them is refused too.
 */
export const SYSTEM_PATHS = ["/proc", "/sys", "/dev", "/etc", "/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/boot", "/run"] as const;

export function validateDriveName(raw: string): string {
  if (raw === "") throw errors.badRequest("driveName: is required");
  if (raw.length > 128) throw errors.badRequest("driveName: too long (max 128 characters)");
  if (!DRIVE_NAME.test(raw)) {
    throw errors.badRequest(`driveName: "${raw}" must start with a letter or digit and contain only letters, digits, "-" and "_"`);
  }
  return raw;
}

/**
 * A path inside the drive: `""`/`/` → `/`, `sub` → `/sub`, `/a/b/` → `/a/b`
 * (the reference's internal normaliser). `..` and `.` segments are refused,
 * so a drive path can never climb out of its drive.
 */
export function normalizeDrivePath(raw: string | undefined): string {
  if (raw === undefined || raw === "") return "/";
  if (raw.length > MAX_PATH) throw errors.badRequest(`drivePath: too long (max ${MAX_PATH} characters)`);
  if (raw.includes("\0")) throw errors.badRequest("drivePath: must not contain NUL bytes");
  const segments = raw.split("/").filter((s) => s !== "");
  if (segments.some((s) => s === ".." || s === ".")) throw errors.badRequest(`drivePath: "${raw}" must not contain "." or ".." segments`);
  return `/${segments.join("/")}`;
}

/**
 * The mount path as a sandbox path: absolute, without `.`/`..` segments
 * (repeated and trailing slashes collapse, so `/mnt/x/` and `/mnt/x` are one
 * path and share one lock), not `/` and not a system directory.
 */
export function normalizeMountPath(raw: string): string {
  if (raw === "") throw errors.badRequest("mountPath: is required");
  if (raw.length > MAX_PATH) throw errors.badRequest(`mountPath: too long (max ${MAX_PATH} characters)`);
  if (raw.includes("\0")) throw errors.badRequest("mountPath: must not contain NUL bytes");
  if (!raw.startsWith("/")) throw errors.badRequest(`mountPath: "${raw}" must be an absolute path (start with /)`);
  const segments = raw.split("/").filter((s) => s !== "");
  if (segments.some((s) => s === ".." || s === ".")) throw errors.badRequest(`mountPath: "${raw}" must be normalized (no "." or ".." segments)`);
  const path = `/${segments.join("/")}`;
  checkMountTarget(path);
  return path;
}

/** Refuses `/` and system directories; used on the requested and on the symlink-resolved path. */
export function checkMountTarget(sandboxPath: string, requested = sandboxPath): void {
  const via = requested === sandboxPath ? "" : ` (${requested} resolves to ${sandboxPath})`;
  if (sandboxPath === "/") throw errors.badRequest(`mountPath: cannot mount over the sandbox root /${via}`);
  const system = SYSTEM_PATHS.find((p) => isSameOrInside(sandboxPath, p));
  if (system) throw errors.badRequest(`mountPath: ${requested} is a system path (inside ${system})${via}`);
}

/** `a` equals `b` or lies under it (both absolute, normalized). */
export function isSameOrInside(a: string, b: string): boolean {
  return a === b || a.startsWith(b === "/" ? "/" : `${b}/`);
}

/** Two paths overlap when one is the other or contains it. */
export function overlaps(a: string, b: string): boolean {
  return isSameOrInside(a, b) || isSameOrInside(b, a);
}
