import { spawnSync } from "node:child_process";

import { mountsUnder } from "../../src/mounts.js";

/**
 * mmdebstrap in root mode mounts /proc, /sys, /dev/pts and /dev/shm inside the
 * root filesystem it builds, in the host's mount namespace; a build that is
 * killed can leave them there. Before a build's directory is removed, they are
 * detached (deepest first): removing it must never reach through a mount.
 * Returns whether nothing is mounted under `dir` any more.
 */
export function releaseMounts(dir: string): boolean {
  for (const m of mountsUnder(dir).sort((a, b) => b.length - a.length)) spawnSync("umount", ["-l", m], { stdio: "ignore" });
  return mountsUnder(dir).length === 0;
}
