import { promises as fsp } from "node:fs";
import { join, posix } from "node:path";
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
  /** Host path. */
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

/** Depth-first, lexical order; symlinks are reported (kind "other") and never followed. Stops when `visit` returns false. */
export async function walk(hostStart: string, limits: WalkLimits, visit: (e: WalkEntry) => boolean | Promise<boolean>): Promise<{ truncated: boolean }> {
  let seen = 0;
  const stopAt = Date.now() + (limits.budgetMs ?? 15_000);
  const stack: { host: string; rel: string }[] = [{ host: hostStart, rel: "" }];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    const entries = (await fsp.readdir(dir.host, { withFileTypes: true }).catch(() => [])).sort((a, b) => (a.name < b.name ? -1 : 1));
    const subdirs: { host: string; rel: string }[] = [];
    for (const d of entries) {
      if (++seen > limits.maxEntries || (seen % 256 === 0 && Date.now() > stopAt)) return { truncated: true };
      if (limits.skipHidden && d.name.startsWith(".")) continue;
      const rel = dir.rel ? `${dir.rel}/${d.name}` : d.name;
      const host = join(dir.host, d.name);
      const kind = d.isDirectory() ? "directory" : d.isFile() ? "file" : "other";
      if (kind === "directory" && (SKIPPED_DIRS.has(d.name) || SYSTEM_DIRS.has(posix.join(limits.sandboxStart, rel)))) continue;
      if (!(await visit({ host, rel, name: d.name, kind }))) return { truncated: false };
      if (kind === "directory") subdirs.push({ host, rel });
    }
    stack.push(...subdirs.reverse());
  }
  return { truncated: false };
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
