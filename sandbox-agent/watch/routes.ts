import { Router } from "express";
import { constants, open } from "node:fs";
import { promisify } from "node:util";
import { errors, fromFsError } from "../../src/errors.js";
import type { Clock, Timer } from "../../src/clock.js";
import { queryBool } from "../../src/http.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";
import { O_PATH } from "../paths/beneath.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { compileIgnore } from "./ignore.js";
import { DirectoryWatcher, type WatchRegistry } from "./watcher.js";

const openAsync = promisify(open);

/** The reference's keepalive period: a `[keepalive]` line every 30 s. */
export const KEEPALIVE_MS = 30_000;
/** A client this far behind (bytes of events unsent) is cut off rather than buffered without bound. */
const MAX_BACKLOG_BYTES = 8 * 1024 * 1024;

/**
 * GET /watch/filesystem/{path}[/**][?ignore=a,b]: streams NDJSON events
 * `{"op", "name", "path", "error": null}` as text/plain, with `[keepalive]`
 * lines, until the client goes away; that frees every watch it held.
 */
export function watchRouter(paths: SandboxPaths, registry: WatchRegistry, clock: Clock): Router {
  const router = Router();
  router.get("/filesystem/{*rest}", async (req, res) => {
    let raw = sandboxPathFromUrl(req.path.slice("/filesystem".length));
    // A trailing `/**` asks for a recursive watch (`/**` alone is the root).
    const recursive = /(^|\/)\*\*$/.test(raw) || queryBool(req.query.recursive);
    raw = raw.replace(/(^|\/)\*\*$/, "") || "/";
    const path = paths.normalize(raw);
    // The directory is resolved confined and held open for the watch's lifetime (the watcher owns the descriptor).
    const dirFd = await paths.use(path, { follow: true }, async ({ pinned, stat }) => {
      if (!pinned || !stat?.isDirectory()) throw errors.badRequest(`${path}: path is not a directory`);
      // A raw descriptor (not a FileHandle, which would close itself when collected), close-on-exec as libuv opens all.
      return openAsync(pinned, O_PATH | constants.O_DIRECTORY).catch((err: unknown) => {
        throw fromFsError(err, "cannot watch", path);
      });
    });

    res.status(200).set({ "Content-Type": "text/plain; charset=utf-8", "X-Accel-Buffering": "no" });
    registry.streams++;
    let ended = false;
    let keepalive: Timer | undefined;
    const end = (error?: string) => {
      if (ended) return;
      ended = true;
      registry.streams--;
      keepalive?.cancel();
      watcher.close();
      if (error !== undefined && !res.destroyed) res.end(`${JSON.stringify({ error })}\n`);
      else res.end();
    };
    const write = (line: string) => {
      if (ended) return;
      if (res.writableLength > MAX_BACKLOG_BYTES) return end("the client is not reading its events fast enough: watch ended");
      res.write(line);
    };
    const watcher = new DirectoryWatcher({
      dirFd,
      sandboxDir: path,
      recursive,
      ignored: compileIgnore(typeof req.query.ignore === "string" ? req.query.ignore : ""),
      registry,
      ownName: (name) => paths.ownWrites.has(name),
      onEvent: (event) => write(`${JSON.stringify({ op: event.op, name: event.name, path: event.path, error: null })}\n`),
      onError: (err) => end(err.message),
    });
    res.on("close", () => end());
    const tick = () => {
      write("[keepalive]\n");
      if (!ended) keepalive = clock.setTimer(KEEPALIVE_MS, tick);
    };
    keepalive = clock.setTimer(KEEPALIVE_MS, tick);
    // Headers go out once every watch is in place: a client that waits for them misses no event.
    await watcher.start();
    if (!ended) res.flushHeaders();
  });
  return router;
}
