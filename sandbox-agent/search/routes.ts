import { Router, type Request, type Response } from "express";
import { promises as fsp } from "node:fs";
import { errors, fromFsError } from "../../src/errors.js";
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
  const parts = await Promise.all(Array.from({ length: workers }, () => pool.run(job, signal, walk)));
  return joinShares(job, parts);
}

/** The search directory: confined like every path, and it must be a directory. */
async function searchDir(paths: SandboxPaths, req: Request, missing: (path: string) => Error): Promise<{ path: string; host: string }> {
  const path = paths.normalize(sandboxPathFromUrl(req.path));
  const host = await paths.resolve(path);
  const stat = await fsp.stat(host).catch((err) => {
    throw (err as NodeJS.ErrnoException).code === "ENOENT" ? missing(path) : fromFsError(err, "cannot search", path);
  });
  if (!stat.isDirectory()) throw errors.badRequest(`${path} is not a directory`);
  return { path, host };
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
    const dir = await searchDir(paths, req, notFound);
    sendJson(res, await runShared(pool, { kind: "find", hostDir: dir.host, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, res));
  });
  return router;
}

/** GET /filesystem-search/{path}: fuzzy file-name search, scored (`fs.search`). */
export function fuzzySearchRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseFuzzyQuery(req.query, paths.normalize(sandboxPathFromUrl(req.path)));
    const dir = await searchDir(paths, req, notFound);
    sendJson(res, await runShared(pool, { kind: "fuzzy", hostDir: dir.host, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, res));
  });
  return router;
}

/** GET /filesystem-content-search/{path}: text or regex in files (`fs.grep`). */
export function contentSearchRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseGrepQuery(req.query);
    const dir = await searchDir(paths, req, (path) => errors.badRequest(`specified directory does not exist: ${path}`));
    sendJson(res, await runShared(pool, { kind: "grep", hostDir: dir.host, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, res));
  });
  return router;
}
