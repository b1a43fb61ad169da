import { readdirSync, type Dirent } from "node:fs";
import type { EntryMatcher } from "./glob.js";

export interface WalkEntry {
  /** Path relative to the search directory, `/`-separated. */
  rel: string;
  name: string;
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
    const host = frame.host === "/" ? `/${name}` : `${frame.host}/${name}`; // (path.join normalizes: measurably slower per entry)
    const depth = frame.depth + 1;
    if (visit({ rel, name, host, isDirectory, isFile: dirent.isFile(), depth }) === false) return { unreadable, stopped: true };
    if (isDirectory && (options.maxDepth === undefined || depth < options.maxDepth)) {
      stack.push({ host, rel, depth, entries: list(host), next: 0 });
    }
  }
  return { unreadable, stopped: false };
}
