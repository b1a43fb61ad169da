import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { isAbsolute, join, posix } from "node:path";
import type { SandboxMount } from "../launcher/types.js";
import { growVolumeImage, loopVolumesUnsupported, mountVolumeImage, removeVolumeImage, unmountVolumeImage } from "./volume-fs.js";

/**
 * Volumes with real sandboxes: a volume is a directory of the simulator,
 *   <dir>/volumes/<workspace>/<volume>
 * created with the volume resource and removed with it. A sandbox's
 * `spec.volumes: [{name, mountPath, readOnly}]` becomes its LaunchSpec.mounts
 * (that directory at mountPath), so every sandbox naming the volume shares its
 * files, and they outlive the sandboxes. Mounting is the launcher's job
 * (docker: --mount; bwrap: --bind); the process launcher cannot mount and
 * refuses a start with mounts. Where the host allows it the directory is a
 * loop-mounted ext4 filesystem of the volume's size (volume-fs.ts).
 */

export interface VolumeAttachment {
  name?: string;
  mountPath?: string;
  readOnly?: boolean;
}

export function workspaceVolumesDir(simDir: string, workspace: string): string {
  return join(simDir, "volumes", workspace);
}

export function volumeDir(simDir: string, workspace: string, volume: string): string {
  return join(workspaceVolumesDir(simDir, workspace), volume);
}

/** Why an attachment cannot be mounted, or undefined when it can (checked when the sandbox is created or updated). */
export function attachmentProblem(attachment: VolumeAttachment, index: number): string | undefined {
  const at = `spec.volumes[${index}]`;
  if (!attachment.name) return `${at}.name: required`;
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(attachment.name)) return `${at}.name: not a volume name`;
  const target = attachment.mountPath;
  if (!target || !isAbsolute(target) || !target.startsWith("/")) return `${at}.mountPath: an absolute path is required`;
  if (posix.normalize(target) === "/" || target.split("/").includes("..")) return `${at}.mountPath: "${target}" cannot be mounted over`;
  return undefined;
}

/** A sandbox's mounts from its spec.volumes (pure: no file is touched). */
export function volumeMounts(simDir: string, workspace: string, attachments: VolumeAttachment[] | undefined): SandboxMount[] {
  return (attachments ?? []).map((a, i) => {
    const problem = attachmentProblem(a, i);
    if (problem) throw new Error(problem);
    return { source: volumeDir(simDir, workspace, a.name!), target: posix.normalize(a.mountPath!).replace(/\/+$/, ""), readOnly: a.readOnly === true };
  });
}

/**
 * Creates the volume's directory (createVolume, and each volume again when a
 * --data simulator starts), and grows it to `sizeMb` (updateVolume, and
 * before each start of a sandbox mounting it: a growth that had to wait is
 * applied then): a filesystem of that size where the host allows it.
 * Returns why the filesystem is still smaller, if it is (volume-fs.ts).
 */
export function provisionVolume(simDir: string, workspace: string, volume: string, sizeMb: number, inUse = false): Promise<string | undefined> {
  const dir = volumeDir(simDir, workspace, volume);
  // One at a time per volume: two creates of one name (one of them then answers 409), or a create and a sandbox's
  // start, must not format the same image file at once.
  const previous = provisioning.get(dir) ?? Promise.resolve(undefined);
  const done = previous
    .catch(() => undefined)
    .then(async () => {
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      if (loopVolumesUnsupported()) return undefined;
      await mountVolumeImage(simDir, workspace, volume, dir, sizeMb);
      return growVolumeImage(simDir, workspace, volume, dir, sizeMb, inUse);
    });
  provisioning.set(dir, done);
  void done
    .finally(() => {
      if (provisioning.get(dir) === done) provisioning.delete(dir);
    })
    .catch(() => {});
  return done;
}

/** The provisioning in flight per volume directory (provisionVolume). */
const provisioning = new Map<string, Promise<string | undefined>>();

/** Removes the volume's files (deleteVolume, once no sandbox names it): its filesystem is unmounted first. */
export function removeVolume(simDir: string, workspace: string, volume: string): void {
  const dir = volumeDir(simDir, workspace, volume);
  unmountVolumeImage(dir);
  rmSync(dir, { recursive: true, force: true });
  removeVolumeImage(simDir, workspace, volume);
}

/** Workspace deletion: every volume of the workspace goes (filesystems unmounted first). */
export function removeWorkspaceVolumes(simDir: string, workspace: string): void {
  const root = workspaceVolumesDir(simDir, workspace);
  if (existsSync(root)) for (const volume of readdirSync(root)) removeVolume(simDir, workspace, volume);
  rmSync(root, { recursive: true, force: true });
  rmSync(join(simDir, "volume-images", workspace), { recursive: true, force: true });
}
