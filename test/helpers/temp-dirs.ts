import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";

/**
 * Temp dirs made by the test helpers, removed after each test file
 * (test/helpers/setup.ts) so that CI machines do not collect them. A dir
 * with something still mounted under it (a drive a failed test left
 * bind-mounted) is left in place: removing it would reach through the mount.
 */
const made = new Set<string>();

export function trackedTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

export function removeTrackedTempDirs(): void {
  const mountPoints = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((line) => (line.split(" ")[1] ?? "").replace(/\\040/g, " "));
  for (const dir of made) {
    if (mountPoints.some((m) => m === dir || m.startsWith(dir + sep))) console.warn(`left ${dir}: something is still mounted under it`);
    else rmSync(dir, { recursive: true, force: true });
  }
  made.clear();
}
