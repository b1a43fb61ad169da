import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseMountInfo, type MountEntry } from "../../../sandbox-agent/drives/mount-table.js";

/**
 * Whether this test process may really mount, found by trying: a bind mount
 * of a fresh temp dir onto itself, undone at once. The capability bits alone
 * are not enough (seccomp and LSMs can refuse mount(2) to root).
 */
export function probeMount(): { ok: true; reason: "" } | { ok: false; reason: string } {
  if (process.platform !== "linux") return { ok: false, reason: `mounting needs Linux, this is ${process.platform}` };
  if (process.getuid?.() !== 0) return { ok: false, reason: "the test process is not root, so mount(8) --bind is refused" };
  const dir = mkdtempSync(join(tmpdir(), "drives-probe-"));
  try {
    const mounted = spawnSync("mount", ["--bind", dir, dir], { encoding: "utf8" });
    if (mounted.error) return { ok: false, reason: `mount(8) could not run: ${mounted.error.message}` };
    if (mounted.status !== 0) return { ok: false, reason: `mount --bind is not permitted here: ${mounted.stderr.trim()}` };
    spawnSync("umount", [dir]);
    return { ok: true, reason: "" };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const MOUNT = probeMount();
if (!MOUNT.ok) console.warn(`[drives tests] SKIPPING tests that need real mounts: ${MOUNT.reason}`);
export const SKIP_REASON = MOUNT.ok ? "" : ` [SKIPPED: ${MOUNT.reason}]`;

export function mountTable(): MountEntry[] {
  return parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8"));
}

export function mountsAt(hostPath: string): MountEntry[] {
  return mountTable().filter((m) => m.mountPoint === hostPath);
}

/** Test safety net: detaches every mount under `base` (deepest first). Only ever temp dirs. */
export function unmountUnder(base: string): void {
  if (!base.startsWith(tmpdir())) throw new Error(`refusing to unmount outside the temp dir: ${base}`);
  for (let round = 0; round < 5; round++) {
    const mine = mountTable()
      .filter((m) => m.mountPoint.startsWith(`${base}/`))
      .sort((a, b) => b.mountPoint.length - a.mountPoint.length);
    if (mine.length === 0) return;
    for (const m of mine) spawnSync("umount", ["-l", m.mountPoint]);
  }
}
