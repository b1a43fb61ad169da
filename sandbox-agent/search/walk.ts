import { closeSync, constants, openSync, readdirSync, readlinkSync, type Dirent } from "node:fs";
import { O_PATH } from "../paths/beneath.js";
import type { EntryMatcher } from "./glob.js";

export interface WalkEntry {
  /** Path relative to the search directory, `/`-separated. */
  rel: string;
  name: string;
  /**
   * The entry's host path, as a string: cheaper to open than a descriptor
   * path (grep opens every file), but re-resolved at each use, so a file
   * opened through it must be vetted before anything read is returned (as
   * grep vets a matching file's real path). Listings never go through it.
   */
  host: string;
  isDirectory: boolean;
  isFile: boolean;
  /** 1 for the directory's own children. */
  depth: number;
}

export interface WalkOptions {
  excludeDirs?: EntryMatcher;
  excludeHidden: boolean;
  /** Deepest level visited (1 = children only); undefined = no limit. */
  maxDepth?: number;
  /** Polled every few hundred entries; true ends the walk early. */
  shouldStop: () => boolean;
  /** Only these of the directory's own entries (and what is below them): one share of a walk split across workers. */
  topLevel?: ReadonlySet<string>;
}

interface Frame {
  /** The directory, held open: listed through `/proc/self/fd/<fd>`, its subdirectories opened from there. */
  fd: number;
  /** Its host path (for WalkEntry.host). */
  path: string;
  rel: string;
  depth: number;
  entries: Dirent[];
  next: number;
}

/**
 * Walks a tree depth-first in lexical order (libuv's scandir sorts each
 * directory bytewise, as Go's filepath.Walk does), one directory listing in
 * memory per level. Symlinks are reported, never followed, so the walk cannot
 * leave the directory it started in: each directory is opened O_NOFOLLOW from
 * its parent's descriptor and listed through its own (#14 item 12), so one
 * swapped for a symlink mid-walk is skipped, not entered. Directories that
 * cannot be read are skipped and counted. `visit` returning false stops the walk.
 */
export function walkTree(hostDir: string, options: WalkOptions, visit: (entry: WalkEntry) => boolean | void): { unreadable: number; stopped: boolean } {
  let unreadable = 0;
  /**
   * The directory opened and listed, or undefined. The start (`path`
   * undefined) is followed: it is a pinned /proc/self/fd path; a subdirectory
   * is opened O_NOFOLLOW from its parent's descriptor.
   */
  const open = (from: string, path: string | undefined, rel: string, depth: number): Frame | undefined => {
    let fd: number;
    try {
      fd = openSync(from, O_PATH | constants.O_DIRECTORY | (path === undefined ? 0 : constants.O_NOFOLLOW));
    } catch {
      unreadable++;
      return undefined;
    }
    const pinned = `/proc/self/fd/${fd}`;
    try {
      return { fd, path: path ?? readlinkSync(pinned), rel, depth, entries: readdirSync(pinned, { withFileTypes: true }), next: 0 };
    } catch {
      closeSync(fd);
      unreadable++;
      return undefined;
    }
  };
  const start = open(hostDir, undefined, "", 0);
  if (!start) return { unreadable, stopped: false };
  const stack: Frame[] = [start];
  try {
    let sinceCheck = 0;
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      if (frame.next >= frame.entries.length) {
        closeSync(stack.pop()!.fd);
        continue;
      }
      if (++sinceCheck >= 256) {
        sinceCheck = 0;
        if (options.shouldStop()) return { unreadable, stopped: true };
      }
      const dirent = frame.entries[frame.next++]!;
      const name = dirent.name;
      if (options.topLevel && frame.depth === 0 && !options.topLevel.has(name)) continue;
      if (options.excludeHidden && name.charCodeAt(0) === 46 /* . */) continue;
      const isDirectory = dirent.isDirectory();
      const rel = frame.rel ? `${frame.rel}/${name}` : name;
      if (isDirectory && options.excludeDirs?.(name, rel)) continue;
      const host = frame.path === "/" ? `/${name}` : `${frame.path}/${name}`; // (path.join normalizes: measurably slower per entry)
      const depth = frame.depth + 1;
      if (visit({ rel, name, host, isDirectory, isFile: dirent.isFile(), depth }) === false) return { unreadable, stopped: true };
      if (isDirectory && (options.maxDepth === undefined || depth < options.maxDepth)) {
        const child = open(`/proc/self/fd/${frame.fd}/${name}`, host, rel, depth);
        if (child) stack.push(child);
      }
    }
    return { unreadable, stopped: false };
  } finally {
    for (const frame of stack) closeSync(frame.fd);
  }
}
