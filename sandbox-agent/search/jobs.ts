import { ContentSearcher, type ContentMatch } from "./content.js";
import { FuzzyMatcher } from "./fuzzy.js";
import { compilePatterns } from "./glob.js";
import type { FindOptions, FuzzyOptions, GrepOptions } from "./options.js";
import { walkTree, type WalkOptions } from "./walk.js";

/** What every search answers beyond the reference's fields: whether it stopped early, and why. */
export interface SearchMeta {
  total: number;
  /** Present and true when results were cut at the limit or the walk stopped at the deadline. */
  truncated?: boolean;
  /** Directories that could not be read (skipped). */
  unreadable?: number;
}

export type FindResult = SearchMeta & { matches: { path: string; type: "file" | "directory" }[] };
export type FuzzyResult = SearchMeta & { matches: { path: string; score: number; type: "file" | "directory" }[] };
export type GrepResult = SearchMeta & { query: string; matches: ContentMatch[] | null };

interface JobBase {
  hostDir: string;
  hostRoot: string;
  /** The root is a held descriptor (an agent host): entries are opened through their directory's descriptor only. */
  byDescriptor?: boolean;
  deadline: number;
  /** One share of a walk split across workers: only these entries of the directory (and what is below them). */
  topLevel?: string[];
  /** Whether this is the first share (the one that reports the directory itself). */
  firstShare?: boolean;
}

export type SearchJob =
  | (JobBase & { kind: "find"; options: FindOptions })
  | (JobBase & { kind: "fuzzy"; options: FuzzyOptions })
  | (JobBase & { kind: "grep"; options: GrepOptions });

/** `cancelled()` is the caller's flag (client gone); the deadline is checked beside it. */
function stopper(deadline: number, cancelled: () => boolean): { shouldStop: () => boolean; timedOut: () => boolean } {
  let timedOut = false;
  return {
    shouldStop: () => {
      if (cancelled()) return true;
      if (Date.now() >= deadline) timedOut = true;
      return timedOut;
    },
    timedOut: () => timedOut,
  };
}

function walkOptions(job: SearchJob, shouldStop: () => boolean): WalkOptions {
  const o = job.options;
  return {
    excludeDirs: compilePatterns(o.excludeDirs),
    excludeHidden: o.excludeHidden,
    maxDepth: o.maxDepth,
    shouldStop,
    topLevel: job.topLevel && new Set(job.topLevel),
    byDescriptor: job.byDescriptor,
  };
}

function meta(total: number, truncated: boolean, unreadable: number): SearchMeta {
  return { total, ...(truncated ? { truncated } : {}), ...(unreadable ? { unreadable } : {}) };
}

/** Files (or directories) by glob, in lexical order; stops at the limit (the first N of the full walk, as the reference). */
export function runFind(job: Extract<SearchJob, { kind: "find" }>, cancelled: () => boolean): FindResult {
  const o = job.options;
  const stop = stopper(job.deadline, cancelled);
  const patterns = compilePatterns(o.patterns);
  const matches: FindResult["matches"] = [];
  let truncated = false;
  // The reference visits the directory itself: with type=directory it is listed as ".".
  if (o.type === "directory" && job.firstShare !== false) matches.push({ path: ".", type: "directory" });
  const { unreadable } = walkTree(job.hostDir, walkOptions(job, stop.shouldStop), (e) => {
    if (o.type === "directory" ? !e.isDirectory : e.isDirectory) return;
    if (o.type === "file" && patterns && !patterns(e.name, e.rel)) return;
    if (matches.length >= o.limit) {
      truncated = true;
      return false;
    }
    matches.push({ path: e.rel, type: o.type });
  });
  if (matches.length > o.limit) matches.length = o.limit;
  return { matches, ...meta(matches.length, truncated || stop.timedOut(), unreadable) };
}

/** Best score first; among equals the shorter path, then lexical order. */
export const byScore = (a: { score: number; path: string }, b: { score: number; path: string }) =>
  b.score - a.score || a.path.length - b.path.length || (a.path < b.path ? -1 : 1);

/** Files and directories whose relative path fuzzy-matches, best first. */
export function runFuzzy(job: Extract<SearchJob, { kind: "fuzzy" }>, cancelled: () => boolean): FuzzyResult {
  const o = job.options;
  const stop = stopper(job.deadline, cancelled);
  const matcher = new FuzzyMatcher(o.pattern);
  const patterns = compilePatterns(o.patterns);
  let matches: FuzzyResult["matches"] = [];
  let dropped = false;
  const { unreadable } = walkTree(job.hostDir, walkOptions(job, stop.shouldStop), (e) => {
    if (!e.isDirectory && patterns && !patterns(e.name, e.rel)) return;
    const score = matcher.score(e.rel);
    if (score === undefined) return;
    matches.push({ path: e.rel, score, type: e.isDirectory ? "directory" : "file" });
    // Keep memory bounded: trim to the best `limit` whenever twice that many are held.
    if (matches.length >= Math.max(2 * o.limit, 1024)) {
      matches.sort(byScore);
      if (matches.length > o.limit) dropped = true;
      matches = matches.slice(0, o.limit);
    }
  });
  matches.sort(byScore);
  if (matches.length > o.limit) {
    dropped = true;
    matches = matches.slice(0, o.limit);
  }
  return { matches, ...meta(matches.length, dropped || stop.timedOut(), unreadable) };
}

/** Lines containing the text (or matching the regex), one match per line, binary files skipped. */
export function runGrep(job: Extract<SearchJob, { kind: "grep" }>, cancelled: () => boolean): GrepResult {
  const o = job.options;
  const stop = stopper(job.deadline, cancelled);
  const include = compilePatterns(o.filePatterns);
  const exclude = compilePatterns(o.excludePatterns);
  const searcher = new ContentSearcher(o);
  const root = job.hostRoot === "/" ? "/" : `${job.hostRoot}/`;
  // Opened through its directory's confined descriptor (O_NOFOLLOW), a file is inside by construction.
  const insideRoot = job.byDescriptor ? () => true : (real: string) => real.startsWith(root);
  // One more than the limit tells a full page from a truncated one.
  const matches: ContentMatch[] = [];
  let files = 0;
  const { unreadable } = walkTree(job.hostDir, walkOptions(job, stop.shouldStop), (e) => {
    if (!e.isFile) return;
    if (include && !include(e.name, e.rel)) return;
    if (exclude?.(e.name, e.rel)) return;
    searcher.searchFile(e.host, e.rel, matches, o.limit + 1, insideRoot);
    if (matches.length > o.limit) return false;
    // Files are where the time goes: check the deadline more often than the walk does.
    if (++files % 64 === 0 && stop.shouldStop()) return false;
  });
  const truncated = matches.length > o.limit || stop.timedOut();
  if (matches.length > o.limit) matches.length = o.limit;
  // The reference answers `matches: null` when nothing matched; the SDK's type says an array, and both parse.
  return { query: o.query, matches: matches.length ? matches : null, ...meta(matches.length, truncated, unreadable) };
}

export function runJob(job: SearchJob, cancelled: () => boolean): FindResult | FuzzyResult | GrepResult {
  switch (job.kind) {
    case "find":
      return runFind(job, cancelled);
    case "fuzzy":
      return runFuzzy(job, cancelled);
    case "grep":
      return runGrep(job, cancelled);
  }
}
