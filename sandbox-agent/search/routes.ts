import { Router, type Request, type Response } from "express";
import { promises as fsp } from "node:fs";
import { errors } from "../../src/errors.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { parseFindQuery, parseFuzzyQuery, parseGrepQuery } from "./options.js";
import { byScore, type SearchJob, type SearchMeta } from "./jobs.js";
import type { SearchPool } from "./pool.js";

/** How long one search may walk before it answers with what it found (`truncated: true`). */
export const SEARCH_TIME_LIMIT_MS = 30_000;

/** The directory's entries in walk order, cut into `count` contiguous shares (none when there is too little to share). */
async function splitTopLevel(host: string, count: number): Promise<string[][]> {
  if (count < 2) return [];
  const names = await fsp.readdir(host).catch(() => [] as string[]); // (libuv sorts them, as the walk does)
  if (names.length < 2) return [];
  const per = Math.ceil(names.length / count);
  const shares: string[][] = [];
  for (let i = 0; i < names.length; i += per) shares.push(names.slice(i, i + per));
  return shares;
}

type Answer = SearchMeta & { matches: { path: string; score?: number }[] | null; query?: string };

/**
 * Runs a search, its directory's entries shared out among the pool's workers
 * when there are several (the walk's syscalls are where the time goes), and
 * joins the answers: in walk order (first share first), or best score first
 * for a fuzzy search, cut at the limit.
 */
async function runShared(pool: SearchPool, job: SearchJob, res: Response): Promise<string> {
  const signal = clientGone(res);
  const shares = await splitTopLevel(job.hostDir, pool.size);
  if (shares.length < 2) return pool.run(job, signal);
  // allSettled, not all: the search directory's descriptor must outlive every share's walk, even when one fails.
  const settled = await Promise.allSettled(shares.map((topLevel, i) => pool.run({ ...job, topLevel, firstShare: i === 0 }, signal)));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) throw failed.reason;
  const texts = settled.map((s) => (s as PromiseFulfilledResult<string>).value);
  const answers = texts.map((t) => JSON.parse(t) as Answer);
  const matches = answers.flatMap((a) => a.matches ?? []);
  if (job.kind === "fuzzy") matches.sort((a, b) => byScore(a as { score: number; path: string }, b as { score: number; path: string }));
  const limit = job.options.limit;
  const truncated = matches.length > limit || answers.some((a) => a.truncated);
  if (matches.length > limit) matches.length = limit;
  const unreadable = answers.reduce((n, a) => n + (a.unreadable ?? 0), 0);
  const meta = { total: matches.length, ...(truncated ? { truncated } : {}), ...(unreadable ? { unreadable } : {}) };
  // Grep answers `matches: null` for nothing, as the reference does.
  if (job.kind === "grep") return JSON.stringify({ query: job.options.query, matches: matches.length ? matches : null, ...meta });
  return JSON.stringify({ matches, ...meta });
}

/**
 * Runs `search` on the search directory, confined like every path and held
 * open for the whole search: the workers walk from its `/proc/self/fd/N`
 * (descriptors are the process's, shared by its threads), so nothing swapped
 * above it once resolved can redirect the walk (#14 item 12). The descriptor
 * is closed only once every worker has answered or died (SearchPool.run
 * settles no sooner), so a walk never starts from a reused number.
 */
async function inSearchDir<T>(paths: SandboxPaths, req: Request, missing: (path: string) => Error, search: (hostDir: string) => Promise<T>): Promise<T> {
  const path = paths.normalize(sandboxPathFromUrl(req.path));
  return paths.use(path, { follow: true }, async ({ pinned, stat }) => {
    if (!pinned || !stat) throw missing(path);
    if (!stat.isDirectory()) throw errors.badRequest(`${path} is not a directory`);
    return search(pinned);
  });
}

/** Aborted when the client goes away before the answer is sent, so its search stops. */
function clientGone(res: Response): AbortSignal {
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

function sendJson(res: Response, json: string): void {
  res.type("application/json").send(json);
}

const notFound = (path: string) => errors.notFound(`${path}: no such directory`);

/** GET /filesystem-find/{path}: files or directories by glob (`fs.find`). */
export function findRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseFindQuery(req.query);
    const json = await inSearchDir(paths, req, notFound, (hostDir) => runShared(pool, { kind: "find", hostDir, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, res));
    sendJson(res, json);
  });
  return router;
}

/** GET /filesystem-search/{path}: fuzzy file-name search, scored (`fs.search`). */
export function fuzzySearchRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseFuzzyQuery(req.query, paths.normalize(sandboxPathFromUrl(req.path)));
    const json = await inSearchDir(paths, req, notFound, (hostDir) => runShared(pool, { kind: "fuzzy", hostDir, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, res));
    sendJson(res, json);
  });
  return router;
}

/** GET /filesystem-content-search/{path}: text or regex in files (`fs.grep`). */
export function contentSearchRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseGrepQuery(req.query);
    const missing = (path: string) => errors.badRequest(`specified directory does not exist: ${path}`);
    const json = await inSearchDir(paths, req, missing, (hostDir) => runShared(pool, { kind: "grep", hostDir, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, res));
    sendJson(res, json);
  });
  return router;
}
