import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { IncomingMessage, ServerResponse } from "node:http";
import { consoleDistDir } from "../../src/package-paths.js";
import { ApiError, errors } from "../../src/errors.js";
import { renderError } from "../http/front.js";

/**
 * The web console: static files built into dist/console by
 * `npm run build`. The page is revalidated on every load (no-cache + ETag);
 * assets carry a content hash in their names, so they are cached forever.
 * Everything goes out under a strict CSP: only this origin's scripts, styles
 * and API (the console talks to /v0 and /sbx like any client).
 */
export const CONSOLE_PATH = "/console";

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const ASSET = /^\/console\/assets\/([\w-]+\.(js|css|txt))$/;
const TYPES: Record<string, string> = { js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8", txt: "text/plain; charset=utf-8" };

function securityHeaders(res: ServerResponse): void {
  res.setHeader("Content-Security-Policy", CONSOLE_CSP);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "no-referrer");
  res.setHeader("X-Frame-Options", "DENY");
  res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
}

function sendError(res: ServerResponse, err: ApiError): void {
  const text = JSON.stringify(renderError(err));
  res.writeHead(err.status, { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

export interface ConsoleHandlerOptions {
  /** dist/console by default. */
  dir?: string;
}

/** Answers GET/HEAD /console, /console/ and /console/assets/*; returns false for every other request (other methods: the app's 404). */
export function createConsoleHandler(options: ConsoleHandlerOptions = {}): (req: IncomingMessage, res: ServerResponse) => boolean {
  let dir = options.dir;
  return (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    if (path !== CONSOLE_PATH && !path.startsWith(`${CONSOLE_PATH}/`)) return false;
    const asset = ASSET.exec(path);
    const isPage = path === CONSOLE_PATH || path === `${CONSOLE_PATH}/` || path === `${CONSOLE_PATH}/index.html`;
    if (!asset && !isPage) {
      sendError(res, errors.notFound(`no console file ${path}`));
      return true;
    }
    dir ??= consoleDistDir();
    const file = asset ? join(dir, "assets", asset[1]!) : join(dir, "index.html");
    readFile(file).then(
      (body) => {
        securityHeaders(res);
        res.setHeader("Content-Type", asset ? TYPES[asset[2]!]! : "text/html; charset=utf-8");
        if (asset) res.setHeader("Cache-Control", "public, max-age=31536000, immutable");
        else {
          // no-cache: always revalidated, so a rebuilt console (new asset names) is picked up at once.
          const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
          res.setHeader("Cache-Control", "no-cache");
          res.setHeader("ETag", etag);
          if (req.headers["if-none-match"] === etag) {
            res.statusCode = 304;
            res.end();
            return;
          }
        }
        res.setHeader("Content-Length", body.length);
        res.statusCode = 200;
        res.end(req.method === "HEAD" ? undefined : body);
      },
      (err: NodeJS.ErrnoException) => {
        if (err.code !== "ENOENT") sendError(res, errors.internal(`console file unreadable: ${err.code ?? err.message}`));
        else if (asset) sendError(res, errors.notFound(`no console file ${path}`));
        else sendError(res, errors.serviceUnavailable("the console is not built: run `npm run build` (it bundles console/ into dist/console)"));
      },
    );
    return true;
  };
}
