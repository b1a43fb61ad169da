import { Router, type Request, type Response } from "express";
import { promises as fsp } from "node:fs";
import { errors, fromFsError } from "../../src/errors.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { parseFindQuery, parseFuzzyQuery, parseGrepQuery } from "./options.js";
import type { SearchPool } from "./pool.js";

/** How long one search may walk before it answers with what it found (`truncated: true`). */
export const SEARCH_TIME_LIMIT_MS = 30_000;

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
    sendJson(res, await pool.run({ kind: "find", hostDir: dir.host, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, clientGone(res)));
  });
  return router;
}

/** GET /filesystem-search/{path}: fuzzy file-name search, scored (`fs.search`). */
export function fuzzySearchRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseFuzzyQuery(req.query, paths.normalize(sandboxPathFromUrl(req.path)));
    const dir = await searchDir(paths, req, notFound);
    sendJson(res, await pool.run({ kind: "fuzzy", hostDir: dir.host, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, clientGone(res)));
  });
  return router;
}

/** GET /filesystem-content-search/{path}: text or regex in files (`fs.grep`). */
export function contentSearchRouter(paths: SandboxPaths, pool: SearchPool, timeLimitMs = SEARCH_TIME_LIMIT_MS): Router {
  const router = Router();
  router.get("/{*rest}", async (req, res) => {
    const options = parseGrepQuery(req.query);
    const dir = await searchDir(paths, req, (path) => errors.badRequest(`specified directory does not exist: ${path}`));
    sendJson(res, await pool.run({ kind: "grep", hostDir: dir.host, hostRoot: paths.hostRoot, options, deadline: Date.now() + timeLimitMs }, clientGone(res)));
  });
  return router;
}
