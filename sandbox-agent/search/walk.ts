import { closeSync, constants, openSync, readdirSync, readlinkSync, type Dirent } from "node:fs";
import { O_PATH } from "../paths/beneath.js";
import type { EntryMatcher } from "./glob.js";

/**
 * One entry of a walk. The walk hands the same object to every `visit`,
 * refilled (a fresh object and host path per entry were most of a find's
 * garbage): read it during the call, keep only its strings.
 */
export class WalkEntry {
  /** Path relative to the search directory, `/`-separated. */
  rel = "";
  name = "";
  /** Host path of the directory holding the entry (a string; the walk itself lists through descriptors). */
  dirHost = "";
  isDirectory = false;
  isFile = false;
  /** 1 for the directory's own children. */
  depth = 0;

  /**
   * The entry's host path, built when asked: a find or a fuzzy search never
   * needs it for a file. A string is cheaper to open than a descriptor path
   * (grep opens every file), but it is resolved again at each use, so what is
   * read through it must be vetted before it is returned (grep checks a
   * matching file's real path). Listings never go through it.
   */
  get host(): string {
    return this.dirHost === "/" ? `/${this.name}` : `${this.dirHost}/${this.name}`;
  }
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
  /**
   * Entries' host paths go through their directory's descriptor (`/proc/self/fd/<dir>/<name>`), never a name the
   * kernel gives the directory: for a root held as a descriptor (an agent host), that name is the sandbox's own.
   */
  byDescriptor?: boolean;
}

interface Frame {
  /** The directory, held open: listed through `/proc/self/fd/<fd>`, its subdirectories opened from there. */
  fd: number;
  /** Its host path (for WalkEntry.host). */
  host: string;
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
 * its parent's descriptor and listed through its own, so one
 * swapped for a symlink mid-walk is skipped, not entered. Directories that
 * cannot be read are skipped and counted. `visit` returning false stops the walk.
 */
export function walkTree(hostDir: string, options: WalkOptions, visit: (entry: WalkEntry) => boolean | void): { unreadable: number; stopped: boolean } {
  let unreadable = 0;
  /**
   * The directory opened and listed, or undefined. The start (`host`
   * undefined) is followed: it is a pinned /proc/self/fd path; a subdirectory
   * is opened O_NOFOLLOW from its parent's descriptor.
   */
  const open = (from: string, host: string | undefined, rel: string, depth: number): Frame | undefined => {
    let fd: number;
    try {
      fd = openSync(from, O_PATH | constants.O_DIRECTORY | (host === undefined ? 0 : constants.O_NOFOLLOW));
    } catch {
      unreadable++;
      return undefined;
    }
    const pinned = `/proc/self/fd/${fd}`;
    try {
      return {
        fd,
        host: options.byDescriptor ? pinned : (host ?? readlinkSync(pinned)),
        rel,
        depth,
        entries: readdirSync(pinned, { withFileTypes: true }),
        next: 0,
      };
    } catch {
      closeSync(fd);
      unreadable++;
      return undefined;
    }
  };
  const start = open(hostDir, undefined, "", 0);
  if (!start) return { unreadable, stopped: false };
  const stack: Frame[] = [start];
  const entry = new WalkEntry();
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
      const depth = frame.depth + 1;
      entry.rel = rel;
      entry.name = name;
      entry.dirHost = options.byDescriptor ? `/proc/self/fd/${frame.fd}` : frame.host;
      entry.isDirectory = isDirectory;
      entry.isFile = !isDirectory && dirent.isFile();
      entry.depth = depth;
      if (visit(entry) === false) return { unreadable, stopped: true };
      if (isDirectory && (options.maxDepth === undefined || depth < options.maxDepth)) {
        const child = open(`/proc/self/fd/${frame.fd}/${name}`, entry.host, rel, depth);
        if (child) stack.push(child);
      }
    }
    return { unreadable, stopped: false };
  } finally {
    for (const frame of stack) closeSync(frame.fd);
  }
}
