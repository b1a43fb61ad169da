import { readdirSync, type Dirent } from "node:fs";
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
  /** Host path of the directory holding the entry. */
  dirHost = "";
  isDirectory = false;
  isFile = false;
  /** 1 for the directory's own children. */
  depth = 0;

  /** The entry's host path, built when asked: a find or a fuzzy search never needs it for a file. */
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
}

interface Frame {
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
 * leave the directory it started in. Directories that cannot be read are
 * skipped and counted. `visit` returning false stops the walk.
 */
export function walkTree(hostDir: string, options: WalkOptions, visit: (entry: WalkEntry) => boolean | void): { unreadable: number; stopped: boolean } {
  let unreadable = 0;
  const list = (host: string): Dirent[] => {
    try {
      return readdirSync(host, { withFileTypes: true });
    } catch {
      unreadable++;
      return [];
    }
  };
  const stack: Frame[] = [{ host: hostDir, rel: "", depth: 0, entries: list(hostDir), next: 0 }];
  if (unreadable) return { unreadable, stopped: false };
  const entry = new WalkEntry();
  let sinceCheck = 0;
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.next >= frame.entries.length) {
      stack.pop();
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
    entry.dirHost = frame.host;
    entry.isDirectory = isDirectory;
    entry.isFile = !isDirectory && dirent.isFile();
    entry.depth = depth;
    if (visit(entry) === false) return { unreadable, stopped: true };
    if (isDirectory && (options.maxDepth === undefined || depth < options.maxDepth)) {
      const host = entry.host; // (path.join normalizes: measurably slower per entry)
      stack.push({ host, rel, depth, entries: list(host), next: 0 });
    }
  }
  return { unreadable, stopped: false };
}
