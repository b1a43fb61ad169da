import { errors } from "../../src/errors.js";
import { splitPatternList } from "./glob.js";

/** The reference daemon's default exclusions for find, search and grep. */
export const DEFAULT_EXCLUDE_DIRS = ["node_modules", "vendor", ".git", "dist", "build", "target", "__pycache__", ".venv", ".next", "coverage"];
/** maxResults above this is lowered to it, as the reference does. */
export const MAX_RESULTS = 1000;
/** What maxResults=0 ("unlimited") means at most, so one request cannot hold the whole disk in memory. */
export const UNLIMITED_FIND_RESULTS = 100_000;
export const UNLIMITED_GREP_RESULTS = 10_000;
export const MAX_CONTEXT_LINES = 20;

interface WalkQuery {
  excludeDirs: string[];
  excludeHidden: boolean;
  maxDepth?: number;
  /** Results kept; truncated beyond. */
  limit: number;
}

export interface FindOptions extends WalkQuery {
  type: "file" | "directory";
  patterns: string[];
}

export interface FuzzyOptions extends WalkQuery {
  pattern: string;
  patterns: string[];
}

export interface GrepOptions extends WalkQuery {
  query: string;
  caseSensitive: boolean;
  regex: boolean;
  contextLines: number;
  filePatterns: string[];
  excludePatterns: string[];
}

type Query = Record<string, unknown>;

/** The last value of a query parameter (Express gives arrays for repeats). */
function param(query: Query, name: string): string | undefined {
  const v = query[name];
  const last = Array.isArray(v) ? v[v.length - 1] : v;
  return typeof last === "string" ? last : undefined;
}

/** maxResults as the reference reads it: default, 0 = unlimited, capped at 1000, 400 when not a non-negative integer. */
function maxResults(query: Query, fallback: number, unlimited: number): number {
  const raw = param(query, "maxResults");
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw errors.badRequest(`invalid maxResults: ${raw}`);
  const n = Number(raw);
  return n === 0 ? unlimited : Math.min(n, MAX_RESULTS);
}

function intParam(query: Query, name: string, max: number): number | undefined {
  const raw = param(query, name);
  if (raw === undefined || raw === "") return undefined;
  if (!/^\d+$/.test(raw.trim())) throw errors.badRequest(`invalid ${name}: ${raw}`);
  return Math.min(Number(raw), max);
}

/** An empty excludeDirs means the defaults (as the reference reads it); "," excludes nothing. */
function excludeDirs(query: Query): string[] {
  const raw = param(query, "excludeDirs");
  if (raw === undefined || raw === "") return DEFAULT_EXCLUDE_DIRS;
  return splitPatternList(raw);
}

/** excludeHidden: true unless given a non-empty value other than "true". */
function excludeHidden(query: Query, fallback: boolean): boolean {
  const raw = param(query, "excludeHidden");
  if (raw === undefined || raw === "") return fallback;
  return raw === "true";
}

function walkQuery(query: Query, fallbackLimit: number, unlimited: number, hidden: boolean): WalkQuery {
  const maxDepth = intParam(query, "maxDepth", 10_000);
  if (maxDepth === 0) throw errors.badRequest("invalid maxDepth: 0 (1 means the directory's own entries)");
  return { excludeDirs: excludeDirs(query), excludeHidden: excludeHidden(query, hidden), maxDepth, limit: maxResults(query, fallbackLimit, unlimited) };
}

export function parseFindQuery(query: Query): FindOptions {
  const type = param(query, "type") || "file";
  if (type !== "file" && type !== "directory") throw errors.badRequest(`invalid search type: ${type}`);
  return { ...walkQuery(query, 20, UNLIMITED_FIND_RESULTS, true), type, patterns: splitPatternList(param(query, "patterns") ?? "") };
}

/**
 * The fuzzy pattern is `?query=` when given. The SDK's fs.search(query, path)
 * never sends its query, and the reference daemon then matches the path text
 * itself; without `query` we do the same, so the SDK gets what it gets there.
 */
export function parseFuzzyQuery(query: Query, sandboxPath: string): FuzzyOptions {
  const pattern = param(query, "query") ?? sandboxPath;
  if (pattern === "" || pattern === "/" || pattern === ".") {
    throw errors.badRequest("query parameter is required in path (@blaxel/core's fs.search does not send its query: add ?query=<text>)");
  }
  return { ...walkQuery(query, 20, UNLIMITED_FIND_RESULTS, true), pattern, patterns: splitPatternList(param(query, "patterns") ?? "") };
}

export function parseGrepQuery(query: Query): GrepOptions {
  const text = param(query, "query");
  if (!text) throw errors.badRequest("query parameter is required");
  const regex = param(query, "regex") === "true";
  const caseSensitive = param(query, "caseSensitive") === "true";
  if (regex) {
    try {
      new RegExp(text, caseSensitive ? "" : "i");
    } catch (err) {
      throw errors.badRequest(`invalid regex: ${(err as Error).message}`);
    }
  }
  return {
    ...walkQuery(query, 100, UNLIMITED_GREP_RESULTS, false),
    query: text,
    caseSensitive,
    regex,
    contextLines: intParam(query, "contextLines", MAX_CONTEXT_LINES) ?? 0,
    filePatterns: splitPatternList(param(query, "filePattern") ?? ""),
    excludePatterns: splitPatternList(param(query, "excludePatterns") ?? ""),
  };
}
