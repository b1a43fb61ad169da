import { constants, promises as fsp } from "node:fs";
import { posix } from "node:path";
import { O_PATH } from "../paths/beneath.js";
import { compilePatterns } from "../search/glob.js";

/**
 * Small, bounded tree walks for the MCP codegen tools (codegenFileSearch,
 * codegenGrepSearch): an async walk per call, where the HTTP find/search/grep
 * routes use the worker pool; globs are compiled by the same code (search/glob.ts).
 */

/** Directories nobody means to search (the reference's find/search defaults). */
export const SKIPPED_DIRS = new Set(["node_modules", "vendor", ".git", "dist", "build", "target", "__pycache__", ".venv", ".next", "coverage"]);
/** Kernel and device trees are never walked (reads there can block). */
const SYSTEM_DIRS = new Set(["/proc", "/sys", "/dev"]);

export interface WalkEntry {
  /** The entry through its directory's descriptor (`/proc/self/fd/<dir>/<name>`): valid during `visit` only. */
  host: string;
  /** Path relative to the walk's start, `/`-separated. */
  rel: string;
  name: string;
  kind: "file" | "directory" | "other";
}

export interface WalkLimits {
  /** Entries looked at before the walk gives up (huge trees). */
  maxEntries: number;
  /** Skip names starting with "." (rg's default). */
  skipHidden: boolean;
  /** Sandbox path of the start, to recognise /proc, /sys and /dev under the root. */
  sandboxStart: string;
  /** Wall-clock milliseconds the walk may take (a slow disk or a huge tree): it stops there, truncated. */
  budgetMs?: number;
}

/** A directory held open while its entries (and the subdirectories still to walk) need it. */
interface HeldDir {
  handle: fsp.FileHandle;
  fd: number;
  rel: string;
  /** Subdirectories pushed and not yet opened, plus one while it is being listed. */
  pending: number;
}

const OPEN_DIR = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** Opens a file of the walk for reading, never through a final link (one swapped in since the listing). */
export function openEntry(host: string): Promise<fsp.FileHandle> {
  return fsp.open(host, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
}

/**
 * Depth-first, lexical order, from a pinned directory (`/proc/self/fd/N`: the caller holds it while this runs);
 * every subdirectory opened O_NOFOLLOW from its parent's descriptor, so a directory swapped for a link mid-walk is
 * skipped, never entered, and no entry is named by a host path (a root served from outside has none). Symlinks are
 * reported (kind "other") and never followed. Stops when `visit` returns false.
 */
export async function walk(pinnedStart: string, limits: WalkLimits, visit: (e: WalkEntry) => boolean | Promise<boolean>): Promise<{ truncated: boolean }> {
  let seen = 0;
  const stopAt = Date.now() + (limits.budgetMs ?? 15_000);
  const held: HeldDir[] = [];
  const release = async (dir: HeldDir) => {
    if (--dir.pending > 0) return;
    held.splice(held.indexOf(dir), 1);
    await dir.handle.close().catch(() => undefined);
  };
  // The start is the pinned /proc/self/fd path itself (followed); every other directory is opened O_NOFOLLOW.
  const open = async (path: string, rel: string): Promise<HeldDir | undefined> => {
    const handle = await fsp.open(path, rel === "" ? O_PATH | constants.O_DIRECTORY : OPEN_DIR).catch(() => undefined);
    if (!handle) return undefined;
    const dir = { handle, fd: handle.fd, rel, pending: 1 };
    held.push(dir);
    return dir;
  };
  const start = await open(pinnedStart, "");
  if (!start) return { truncated: false };
  const stack: { parent: HeldDir; name: string; rel: string }[] = [];
  try {
    let current: HeldDir | undefined = start;
    for (;;) {
      if (current) {
        const at = `/proc/self/fd/${current.fd}`;
        const entries = (await fsp.readdir(at, { withFileTypes: true }).catch(() => [])).sort((a, b) => (a.name < b.name ? -1 : 1));
        const subdirs: { parent: HeldDir; name: string; rel: string }[] = [];
        for (const d of entries) {
          if (++seen > limits.maxEntries || (seen % 256 === 0 && Date.now() > stopAt)) return { truncated: true };
          if (limits.skipHidden && d.name.startsWith(".")) continue;
          const rel = current.rel ? `${current.rel}/${d.name}` : d.name;
          const kind = d.isDirectory() ? "directory" : d.isFile() ? "file" : "other";
          if (kind === "directory" && (SKIPPED_DIRS.has(d.name) || SYSTEM_DIRS.has(posix.join(limits.sandboxStart, rel)))) continue;
          if (!(await visit({ host: `${at}/${d.name}`, rel, name: d.name, kind }))) return { truncated: false };
          if (kind === "directory") subdirs.push({ parent: current, name: d.name, rel });
        }
        current.pending += subdirs.length;
        stack.push(...subdirs.reverse());
        await release(current);
      }
      const next = stack.pop();
      if (!next) return { truncated: false };
      current = await open(`/proc/self/fd/${next.parent.fd}/${next.name}`, next.rel);
      await release(next.parent);
    }
  } finally {
    await Promise.all(held.map((d) => d.handle.close().catch(() => undefined)));
  }
}

/** Case-insensitive subsequence match ("mngr" matches "manager.ts"). */
export function isSubsequence(query: string, text: string): boolean {
  const q = query.toLowerCase();
  const t = text.toLowerCase();
  let i = 0;
  for (let j = 0; j < t.length && i < q.length; j++) if (t[j] === q[i]) i++;
  return i === q.length;
}

/**
 * A glob as ripgrep's `-g` reads it (`*` and `?` within a segment, `**` across, `{a,b}`, `[...]`; without
 * `/` it matches the basename at any depth): the filesystem search's own compiler (search/glob.ts).
 */
export function globMatcher(glob: string): (relPath: string) => boolean {
  const match = compilePatterns([glob]) ?? (() => false);
  return (relPath) => {
    const rel = relPath.replace(/^\//, "");
    return match(posix.basename(rel), rel);
  };
}
