import { constants, promises as fsp, readFileSync } from "node:fs";
import { posix } from "node:path";
import { ApiError, errors, isErrno } from "../../src/errors.js";
import { fdPath, O_PATH } from "../paths/beneath.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { MOUNTINFO, readMountTable, type MountEntry } from "./mount-table.js";
import { describeExit, DriveBusyError, outputTail, PATH_MOUNT_PROGRAMS, run, type MountPrograms } from "./run.js";

/**
 * Mount points held open. mount(8) and umount(8) resolve the
 * path strings they are given, so a parent swapped for a symlink between the
 * agent's check and the mount put bind mounts outside --root. Here the mount
 * point's parent is pinned (SandboxPaths.use), the mount point is opened
 * O_NOFOLLOW from it, and the programs get those descriptors as their fd 3
 * (and 4), named `/proc/self/fd/3` with --no-canonicalize so libmount never
 * turns them back into strings. A directory that is a mount point cannot be
 * renamed or removed in this mount namespace (EBUSY), so once mounted on, its
 * place stays the one checked.
 */
export interface MountTarget {
  /** The mount point's parent directory, held open. */
  parentFd: number;
  /** The mount point's name in it. */
  name: string;
  /** The host path the service checked (under --root, clear of the agent's state); under a held root, the sandbox's path. */
  hostPath: string;
  /** The mount table that path is a mount point in (SandboxPaths.mountTable). */
  table: string;
  /** The mount point itself, held open (O_PATH, opened O_NOFOLLOW): what a kernel mount lands on. Only when asked for. */
  dirFd?: number;
}

/** 409: what was checked is not there any more (a process of the sandbox is moving directories); a retry may succeed. */
export function changed(mountPath: string): ApiError {
  return errors.conflict(`mountPath: ${mountPath} changed during the request (a parent directory was moved or replaced); retry`);
}

/** How a program started with `fds: [a, b]` names them. */
export const CHILD_FD = ["/proc/self/fd/3", "/proc/self/fd/4"] as const;

/** Output of a program given CHILD_FD paths, with the paths they stand for (the service then shows sandbox paths). */
export function withPathsNamed(text: string, named: readonly (readonly [string, string])[]): string {
  return named.reduce((t, [fdName, path]) => t.split(fdName).join(path), text);
}

/** The kernel's id of the mount an open descriptor is on (proc(5): fdinfo's mnt_id). */
export function mountIdOf(fd: number): number {
  const match = /^mnt_id:\s*(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
  if (!match) throw new Error(`/proc/self/fdinfo/${fd} has no mnt_id`);
  return Number(match[1]);
}

/**
 * Runs `fn` with the mount point pinned: its parent resolved beneath the root
 * and held, and still at the host path the service checked (else 409: a
 * parent was moved or replaced in between). With `openDir`, the mount point
 * is opened too and must be a directory (never a link).
 */
export async function withMountTarget<T>(
  paths: SandboxPaths,
  mountPath: string,
  hostPath: string,
  openDir: boolean,
  fn: (target: MountTarget) => Promise<T>,
): Promise<T> {
  return paths.use(posix.dirname(mountPath), { follow: true }, async (parent) => {
    const name = posix.basename(mountPath);
    if (parent.pinnedFd === undefined || !parent.stat?.isDirectory()) throw changed(mountPath);
    if (posix.join(await parent.namespacePath(), name) !== hostPath) throw changed(mountPath);
    const target: MountTarget = { parentFd: parent.pinnedFd, name, hostPath, table: paths.mountTable };
    if (!openDir) return fn(target);
    let dir: fsp.FileHandle;
    try {
      dir = await fsp.open(`${parent.pinned}/${name}`, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch (e) {
      // Made a directory a moment ago; a link, a file or nothing now.
      if (isErrno(e, "ENOENT", "ENOTDIR", "ELOOP")) throw changed(mountPath);
      throw e;
    }
    try {
      if (paths.isHidden(await dir.stat())) throw errors.badRequest(`mountPath: ${mountPath} overlaps the agent's data directory or drives directory`);
      // Opening a name crosses into what is mounted there: a mount point already in use (found at another
      // path when the service looked, its parent renamed since) is refused, never mounted over.
      if (mountIdOf(dir.fd) !== mountIdOf(target.parentFd)) throw errors.conflict(`mountPath: ${mountPath} is already a mount point`);
      return await fn({ ...target, dirFd: dir.fd });
    } finally {
      await dir.close();
    }
  });
}

/**
 * The mount on top of the held directory `dirFd`, wherever that directory is
 * now: its root held open (close it) and its mount table entry; undefined when
 * nothing is mounted on it. Found through the directory's own parent (`..`)
 * and name, and checked by mount id, so a path swapped meanwhile is never used.
 */
export async function mountOn(dirFd: number, table = MOUNTINFO): Promise<{ root: fsp.FileHandle; entry: MountEntry } | undefined> {
  const at = await fsp.readlink(`/proc/self/fd/${dirFd}`);
  const under = mountIdOf(dirFd);
  const parent = await fsp.open(`/proc/self/fd/${dirFd}/..`, O_PATH | constants.O_DIRECTORY);
  let root: fsp.FileHandle;
  try {
    root = await fsp.open(`${fdPath(parent)}/${posix.basename(at)}`, O_PATH | constants.O_NOFOLLOW);
  } catch (e) {
    if (isErrno(e, "ENOENT", "ENOTDIR")) return undefined;
    throw e;
  } finally {
    await parent.close();
  }
  const id = mountIdOf(root.fd);
  const entry = (await readMountTable(table)).find((m) => m.mountId === id);
  // (Not compared with `at`: a parent renamed since would tell a mount on the directory from one elsewhere wrongly.
  // The directory is a mount point, so its name cannot change: `..` and that name lead to it.)
  if (entry && id !== under && entry.parentId === under) return { root, entry };
  await root.close();
  return undefined;
}

/** The id of the mount at `target` (its parent's entry `name`, mounts crossed), or undefined when nothing is there. */
export async function mountIdAt(target: MountTarget): Promise<number | undefined> {
  const handle = await fsp.open(`/proc/self/fd/${target.parentFd}/${target.name}`, O_PATH | constants.O_NOFOLLOW).catch((e: unknown) => {
    if (isErrno(e, "ENOENT")) return undefined;
    throw e;
  });
  if (!handle) return undefined;
  try {
    return mountIdOf(handle.fd);
  } finally {
    await handle.close();
  }
}

/** `umount -l` of exactly the mount whose root is held: undoes a mount that went wrong. */
export async function detach(root: fsp.FileHandle, programs: MountPrograms = PATH_MOUNT_PROGRAMS): Promise<void> {
  const result = await run([...programs.umount, "-l", "--no-canonicalize", CHILD_FD[0]], { fds: [root.fd] });
  if (result.code !== 0) throw errors.internal(`Failed to unmount drive: umount -l ${describeExit(result)}: ${outputTail(result)}`);
}

/**
 * umount(8) at the pinned mount point, or `umount -l` (detach now, clean up
 * when no longer busy). A plain unmount names the mount point through its
 * held parent (`/proc/self/fd/3/<name>`): a descriptor on the mount itself
 * would keep it busy. The name cannot be swapped while it is a mount point.
 */
export async function unmountTarget(target: MountTarget, lazy: boolean, programs: MountPrograms = PATH_MOUNT_PROGRAMS): Promise<void> {
  const result = await run([...programs.umount, ...(lazy ? ["-l"] : []), "--no-canonicalize", `${CHILD_FD[0]}/${target.name}`], { fds: [target.parentFd] });
  if (result.code === 0) return;
  const tail = withPathsNamed(outputTail(result), [[`${CHILD_FD[0]}/${target.name}`, target.hostPath]]);
  if (/busy/i.test(tail)) throw new DriveBusyError(tail);
  throw errors.internal(`Failed to unmount drive: umount ${describeExit(result)}: ${tail}`);
}
