import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { cp, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";

import { mountsUnder } from "../../src/mounts.js";

/**
 * The files of sandbox snapshots, under the simulator's data dir:
 *   <dir>/snapshots/<workspace>/<snapshot id>   a copy of the sandbox's root at snapshot time
 * A snapshot copies the sandbox's own files, not what is mounted in it
 * (drives stay shared resources, as on the platform). Copies land in a
 * temporary sibling first and are renamed into place, so a half-done copy
 * is never taken for a snapshot or a restored root. A copy keeps what a
 * machine's snapshot keeps: owners (files chowned to other ids in the sandbox),
 * modes, times, hard and symbolic links, and the overlay whiteouts that say an
 * image file was deleted (`cp -a`, through the launcher's id mapping where it
 * has one: Launcher.copyTree).
 */
export class SnapshotFiles {
  /** `removeTree`: rm -rf of a directory sandboxes wrote into (Launcher.removeTree: files of their other users included); `copy`: Launcher.copyTree. */
  constructor(
    private readonly dir: string,
    private readonly removeTree: (path: string) => void = (path) => rmSync(path, { recursive: true, force: true }),
    private readonly copy: (source: string, target: string) => Promise<void> = copyAll,
  ) {}

  dirOf(workspace: string, id: string): string {
    return join(this.dir, "snapshots", workspace, id);
  }

  /** Copies `root` (a sandbox's root directory; absent = empty) into the snapshot `id`. */
  async save(workspace: string, id: string, root: string): Promise<void> {
    const target = this.dirOf(workspace, id);
    await copyTree(root, target, this.copy, this.removeTree);
  }

  /**
   * Replaces `root` with the snapshot's files (fork into a new sandbox,
   * restore into an existing one). Refuses while anything is mounted under
   * `root`: removing through a bind mount would remove a drive's files.
   */
  async restoreInto(workspace: string, id: string, root: string): Promise<void> {
    const mounted = mountsUnder(root);
    if (mounted.length > 0) throw new Error(`sandbox root still has mounts (${mounted.join(", ")})`);
    await copyTree(this.dirOf(workspace, id), root, this.copy, this.removeTree);
  }

  remove(workspace: string, id: string): void {
    this.removeTree(this.dirOf(workspace, id));
  }

  removeWorkspace(workspace: string): void {
    this.removeTree(join(this.dir, "snapshots", workspace));
  }
}

/** `cp -a` (as root: owners kept; any user: modes, times, links, overlay whiteouts). `target` must not exist. */
function copyAll(source: string, target: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("cp", ["-a", "-T", "--", source, target], { timeout: 30 * 60_000, maxBuffer: 1 << 20 }, (err, _out, stderr) => {
      if (err) reject(new Error(`could not copy ${source}: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
  });
}

/** Makes `target` an exact copy of `source` (empty when source is absent), mount points left out. */
async function copyTree(
  source: string,
  target: string,
  copy: (source: string, target: string) => Promise<void>,
  removeTree: (path: string) => void,
): Promise<void> {
  const staging = `${target}.tmp-${randomBytes(4).toString("hex")}`;
  mkdirSync(dirname(target), { recursive: true });
  try {
    if (existsSync(source)) {
      const mounted = new Set(mountsUnder(source).filter((m) => m !== source));
      // Something mounted inside on the host (drives under a non-isolating launcher): copied around it, file by file.
      if (mounted.size > 0) await cp(source, staging, { recursive: true, verbatimSymlinks: true, filter: (path) => !mounted.has(path) });
      else await copy(source, staging);
    } else {
      mkdirSync(staging, { recursive: true });
    }
    removeTree(target);
    await rename(staging, target);
  } catch (err) {
    try {
      removeTree(staging);
    } catch {
      await rm(staging, { recursive: true, force: true });
    }
    throw err;
  }
}
