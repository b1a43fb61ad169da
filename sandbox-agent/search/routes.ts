import { Router, type Request, type Response } from "express";
import { promises as fsp } from "node:fs";
import { errors } from "../../src/errors.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { parseFindQuery, parseFuzzyQuery, parseGrepQuery } from "./options.js";
import { joinShares } from "./answer.js";
import type { SearchJob } from "./jobs.js";
import type { SearchPool } from "./pool.js";

/** How long one search may walk before it answers with what it found (`truncated: true`). */
export const SEARCH_TIME_LIMIT_MS = 30_000;

/** Shares per worker taking part in a walk: more than one, so a worker the machine slows down is not waited for. */
const SHARES_PER_WORKER = 4;
/** Every share lists the directory again: past this many entries, one share per worker. */
const FINE_SHARES_MAX_ENTRIES = 1000;

/** The directory's entries in walk order, cut into contiguous shares (none when there is too little to share). */
async function splitTopLevel(host: string, workers: number): Promise<string[][]> {
  if (workers < 2) return [];
  const names = await fsp.readdir(host).catch(() => [] as string[]); // (libuv sorts them, as the walk does)
  if (names.length < 2) return [];
  const count = names.length <= FINE_SHARES_MAX_ENTRIES ? workers * SHARES_PER_WORKER : workers;
  const per = Math.ceil(names.length / count);
  const shares: string[][] = [];
  for (let i = 0; i < names.length; i += per) shares.push(names.slice(i, i + per));
  return shares;
}

/**
 * Runs a search, its directory's entries shared out among the pool's workers
 * (the walk's syscalls are where the time goes), and joins the answers in
 * walk order. Workers idle now take part; one is waited for as any search
 * is, the others are not (a busy pool must not hold this answer behind
 * another search).
 */
async function runShared(pool: SearchPool, job: SearchJob, res: Response): Promise<string> {
  const signal = clientGone(res);
  const topLevel = await splitTopLevel(job.hostDir, pool.size);
  const workers = Math.min(pool.size, pool.free);
  if (topLevel.length < 2 || workers < 2) return joinShares(job, [await pool.run(job, signal)]);
  const walk = { topLevel, claim: new SharedArrayBuffer(4) };
  const parts = await allSettledThen(Array.from({ length: workers }, () => pool.run(job, signal, walk)));
  return joinShares(job, parts);
}

/** Promise.all that waits for every promise before failing: the search directory's descriptor must outlive every worker's walk. */
async function allSettledThen<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  for (const s of settled) if (s.status === "rejected") throw s.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/**
 * Runs `search` on the search directory, confined like every path and held
 * open for the whole search: the workers walk from its `/proc/self/fd/N`
 * (descriptors are the process's, shared by its threads), so nothing swapped
 * above it once resolved can redirect the walk. The descriptor
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

/** A search's kind and options, as one of SearchJob's forms. */
type SearchRequest = SearchJob extends infer J ? (J extends SearchJob ? Pick<J, "kind" | "options"> : never) : never;

/** What tells one search route from another: how it reads its query, and what a missing directory answers. */
export interface SearchRoute {
  parse(req: Request, paths: SandboxPaths): SearchRequest;
  missing(path: string): Error;
}

const notFound = (path: string) => errors.notFound(`${path}: no such directory`);

/** GET /filesystem-find/{path}: files or directories by glob (`fs.find`). */
export const FIND: SearchRoute = { parse: (req) => ({ kind: "find", options: parseFindQuery(req.query) }), missing: notFound };

/** GET /filesystem-search/{path}: fuzzy file-name search, scored against the searched path (`fs.search`). */
export const FUZZY_SEARCH: SearchRoute = {
  parse: (req, paths) => ({ kind: "fuzzy", options: parseFuzzyQuery(req.query, paths.normalize(sandboxPathFromUrl(req.path))) }),
  missing: notFound,
};

/** GET /filesystem-content-search/{path}: text or regex in files (`fs.grep`). */
export const CONTENT_SEARCH: SearchRoute = {
  parse: (req) => ({ kind: "grep", options: parseGrepQuery(req.query) }),
  missing: (path) => errors.badRequest(`specified directory does not exist: ${path}`),
};

/** One search route: its query is read first (a bad one is a 400 whatever the path), then the directory searched. */
export function searchRouter(paths: SandboxPaths, pool: SearchPool, route: SearchRoute, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const search = route.parse(req, paths);
    const json = await inSearchDir(paths, req, route.missing, (hostDir) =>
      runShared(pool, { ...search, hostDir, hostRoot: paths.hostRoot, byDescriptor: paths.rootHeld, deadline: Date.now() + timeLimitMs }, res),
    );
    sendJson(res, json);
  });
  return router;
}
