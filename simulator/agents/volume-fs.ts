import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { chmodSync, closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";

import { mountsUnder } from "../../src/mounts.js";

/**
 * Where the host allows it (root, mkfs.ext4, a free loop device), a volume is
 * a filesystem of its spec.size: a sparse image file
 *   <dir>/volume-images/<workspace>/<volume>.ext4
 * formatted ext4 and loop-mounted at the volume's directory, so writing past
 * its size fails with ENOSPC as on the platform. Mounted when the volume is
 * created and when a --data simulator starts again, unmounted (the loop device
 * detaching itself: autoclear) when it is deleted and when the simulator stops.
 * A volume that grows is resized online. Elsewhere a volume is a plain
 * directory (volumes.ts) and the reason is logged.
 */

const execFileAsync = promisify(execFile);

let support: string | undefined | null = null;

/** Why volumes cannot be filesystems of their size here, or undefined when they can (probed once). */
export function loopVolumesUnsupported(): string | undefined {
  if (support !== null) return support;
  support = probe();
  return support;
}

function probe(): string | undefined {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0) return "the simulator does not run as root (loop mounts need it)";
  for (const tool of ["mkfs.ext4", "e2fsck", "resize2fs", "losetup", "findmnt", "mount", "umount"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    } catch {
      return `${tool} is not installed (apt-get install e2fsprogs mount)`;
    }
  }
  try {
    execFileSync("losetup", ["-f"], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    return `no free loop device (losetup -f: ${((err as { stderr?: Buffer }).stderr ?? "").toString().trim() || (err as Error).message})`;
  }
  return undefined;
}

export function volumeImagePath(simDir: string, workspace: string, volume: string): string {
  return join(simDir, "volume-images", workspace, `${volume}.ext4`);
}

const isMounted = (dir: string) => mountsUnder(dir).includes(dir);

/** Runs a tool without holding up the event loop (mkfs.ext4 of a large volume takes tens of milliseconds). */
async function run(command: string, args: string[]): Promise<void> {
  await execFileAsync(command, args, { encoding: "utf8" });
}

/**
 * Makes the volume's directory a filesystem of `sizeMb`: the image is created
 * (sparse) and formatted on first use, then loop-mounted. Idempotent; callers
 * run one at a time per volume (volumes.ts).
 */
export async function mountVolumeImage(simDir: string, workspace: string, volume: string, mountDir: string, sizeMb: number): Promise<void> {
  const image = volumeImagePath(simDir, workspace, volume);
  mkdirSync(mountDir, { recursive: true });
  if (isMounted(mountDir)) return;
  if (!existsSync(image)) {
    mkdirSync(dirname(image), { recursive: true });
    const fd = openSync(`${image}.tmp`, "w", 0o600);
    try {
      ftruncateSync(fd, sizeMb * 1024 * 1024);
    } finally {
      closeSync(fd);
    }
    const owner = `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`;
    await run("mkfs.ext4", [
      "-q",
      "-F",
      "-m",
      "0",
      "-E",
      `lazy_itable_init=1,lazy_journal_init=1,root_owner=${owner}`,
      "-L",
      volume.slice(0, 16),
      `${image}.tmp`,
    ]);
    renameSync(`${image}.tmp`, image);
  }
  await run("mount", ["-o", "loop", "-t", "ext4", image, mountDir]);
  // Sandboxes run as the simulator's user and as others (containers): the volume's root is writable by all, as a fresh platform volume is.
  chmodSync(mountDir, 0o777);
  rmSync(join(mountDir, "lost+found"), { recursive: true, force: true });
}

/**
 * A volume that grew (updateVolume, spec.size only grows): its image is
 * extended and the ext4 resized online (losetup -c, resize2fs on the mounted
 * device). Online first, used or not: every sandbox mounting the volume (a
 * running one, or a deleted one whose stop is still under way) binds this
 * same filesystem, so each sees the new size at once. Where the kernel
 * refuses an online resize (resize2fs needs CAP_SYS_RESOURCE, which a
 * container may lack), it is done offline (unmounted, e2fsck -f, resize2fs,
 * mounted again; a resized copy when a stale mount of it lingers elsewhere),
 * but not while a sandbox uses the volume (`inUse`: it would keep writing to
 * the old one). Then the growth waits: the image keeps its size and the
 * reason is returned; the next call (the next start of a sandbox mounting
 * the volume, volumes.ts) tries again. Returns undefined once the
 * filesystem has the size.
 */
export function growVolumeImage(simDir: string, workspace: string, volume: string, mountDir: string, sizeMb: number, inUse: boolean): string | undefined {
  const image = volumeImagePath(simDir, workspace, volume);
  if (!existsSync(image) || !isMounted(mountDir) || statSync(image).size >= sizeMb * 1024 * 1024) return undefined;
  const device = execFileSync("findmnt", ["-n", "-o", "SOURCE", "--mountpoint", mountDir], { encoding: "utf8" }).trim();
  const before = statSync(image).size;
  let online: string;
  try {
    extend(image, sizeMb);
    execFileSync("losetup", ["-c", device], { stdio: ["ignore", "ignore", "pipe"] });
    execFileSync("resize2fs", [device], { stdio: ["ignore", "ignore", "pipe"] });
    return undefined;
  } catch (err) {
    online = stderrOf(err);
    extend(image, before / (1024 * 1024)); // the filesystem was not resized: the image keeps its size
    execFileSync("losetup", ["-c", device], { stdio: "ignore" });
  }
  if (inUse) return `a running sandbox mounts it and this host cannot resize it online (${online})`;
  // Everything written reaches the image before it is checked and resized.
  execFileSync("sync", ["-f", mountDir], { stdio: ["ignore", "ignore", "pipe"] });
  execFileSync("umount", [mountDir], { stdio: ["ignore", "ignore", "pipe"] });
  if (loopDevicesAfterUnmount(image).length === 0) {
    extend(image, sizeMb);
    resizeOffline(image);
  } else {
    // Still mounted elsewhere: each isolated sandbox's launcher keeps a copy of the host's mounts in its own mount
    // namespace (invisible to the sandbox), and a deleted sandbox may still be stopping. Resizing the image under
    // that live filesystem would corrupt it, and mounting it again would hand back the old one: the grown
    // filesystem is a resized copy put in the image's place; the old one lives on, unused, until its last holder exits.
    const copy = `${image}.grow`;
    try {
      execFileSync("cp", ["--sparse=always", image, copy], { stdio: ["ignore", "ignore", "pipe"] });
      extend(copy, sizeMb);
      resizeOffline(copy);
      renameSync(copy, image);
    } catch (err) {
      rmSync(copy, { force: true });
      execFileSync("mount", ["-o", "loop", "-t", "ext4", image, mountDir], { stdio: ["ignore", "ignore", "pipe"] });
      throw err;
    }
  }
  execFileSync("mount", ["-o", "loop", "-t", "ext4", image, mountDir], { stdio: ["ignore", "ignore", "pipe"] });
  return undefined;
}

/** e2fsck -f (journal replayed, required by resize2fs) then resize2fs to the image's new length; nothing mounts it. */
function resizeOffline(image: string): void {
  try {
    execFileSync("e2fsck", ["-f", "-p", image], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    if ((err as { status?: number }).status !== 1) throw err; // 1 = errors corrected
  }
  execFileSync("resize2fs", [image], { stdio: ["ignore", "ignore", "pipe"] });
}

/** The loop devices still backed by the image after its last known mount went: autoclear may take a moment to detach the host's. */
function loopDevicesAfterUnmount(image: string): string[] {
  let holders = loopDevicesOf(image);
  for (let waited = 0; holders.length > 0 && waited < 1_000; waited += 100) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    holders = loopDevicesOf(image);
  }
  return holders;
}

/** The loop devices backed by the image (`losetup -j`): the mounts of it that are still alive, in any mount namespace. */
export function loopDevicesOf(image: string): string[] {
  const out = execFileSync("losetup", ["-n", "-O", "NAME", "-j", image], { encoding: "utf8" });
  return out
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
}

function extend(image: string, sizeMb: number): void {
  const fd = openSync(image, "r+");
  try {
    ftruncateSync(fd, sizeMb * 1024 * 1024);
  } finally {
    closeSync(fd);
  }
}

const stderrOf = (err: unknown) => ((err as { stderr?: Buffer }).stderr ?? "").toString().trim().split("\n").at(-1) || (err as Error).message;

/** Unmounts the volume's filesystem if mounted (lazily when still busy); its image stays. */
export function unmountVolumeImage(mountDir: string): void {
  if (!isMounted(mountDir)) return;
  try {
    execFileSync("umount", [mountDir], { stdio: ["ignore", "ignore", "pipe"] });
  } catch {
    execFileSync("umount", ["-l", mountDir], { stdio: ["ignore", "ignore", "pipe"] });
  }
}

/** Unmounts every volume filesystem of every workspace (simulator stop). */
export function unmountAllVolumeImages(simDir: string): void {
  const root = join(simDir, "volumes");
  if (!existsSync(root)) return;
  for (const workspace of readdirSync(root)) {
    for (const volume of readdirSync(join(root, workspace))) unmountVolumeImage(join(root, workspace, volume));
  }
}

export function removeVolumeImage(simDir: string, workspace: string, volume: string): void {
  rmSync(volumeImagePath(simDir, workspace, volume), { force: true });
}
