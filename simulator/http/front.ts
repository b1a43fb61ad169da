import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, errors } from "../../src/errors.js";
import { redactUrl } from "../../src/logging.js";
import { resolveVersion, VERSION_HEADERS } from "../../src/versioning.js";

/** The front logs each request and applies the test hooks' injected faults; the rest is the dispatcher's. */
export interface FrontDeps {
  logger: Logger;
  testHooks: TestHooksState;
}
import { injectedFault } from "./faults.js";
import { closeRatherThanDrain, hasBody } from "./body-budget.js";
import type { Dispatcher, Match, RequestView } from "./operation.js";
import type { Logger } from "../../src/logging.js";
import type { TestHooksState } from "./test-hooks-state.js";

/**
 * The request listener in front of Express: control-plane operations are
 * answered here directly (Express 5 alone costs ~170 µs per request on this
 * class of machine, more than everything an operation does), and every other
 * request (/health, /_sim, OAuth, account metrics, unknown routes) goes to the
 * Express app. Both render errors as {error, code, message}.
 */
export type Listener = (req: IncomingMessage, res: ServerResponse) => void;

export const BODY_LIMIT = 10 * 1024 * 1024;

export function renderError(err: ApiError): Record<string, unknown> {
  return { error: err.code, code: err.status, message: err.message, ...err.details };
}

export function createFront(deps: FrontDeps, dispatcher: Dispatcher, fallback: Listener): Listener {
  return (req, res) => {
    const url = req.url ?? "/";
    if (!url.startsWith("/v0/")) return fallback(req, res);
    const q = url.indexOf("?");
    const path = q < 0 ? url.slice(3) : url.slice(3, q);
    let match: Match | undefined;
    try {
      match = dispatcher.match(req.method ?? "GET", path);
    } catch (err) {
      return fail(res, err);
    }
    if (!match) return fallback(req, res);
    const started = process.hrtime.bigint();
    const search = q < 0 ? "" : url.slice(q + 1);
    const failed = (err: unknown) => {
      let apiError = toApiError(deps, err, req);
      if (match.op.errorShape)
        apiError = match.op.errorShape(apiError, { method: req.method ?? "GET", headers: req.headers, body: (req as { parsedBody?: unknown }).parsedBody });
      // A large body left unread (refused before it was read): close rather than drain it.
      if (closeRatherThanDrain(req)) res.setHeader("Connection", "close");
      fail(res, apiError, true);
    };
    const replied = () => logWhenFinished(deps, req, res, started);
    // A request without a body (every get and list) runs in this turn: no promise unless its handler returns one.
    if (!deps.testHooks.enabled && !hasBody(req)) {
      let pending: void | Promise<void>;
      try {
        pending = run(dispatcher, match, req, res, search, undefined);
      } catch (err) {
        failed(err);
        return replied();
      }
      if (pending) pending.catch(failed).finally(replied);
      else replied();
      return;
    }
    handle(deps, dispatcher, match, req, res, search).catch(failed).finally(replied);
  };
}

async function handle(deps: FrontDeps, dispatcher: Dispatcher, match: Match, req: IncomingMessage, res: ServerResponse, search: string): Promise<void> {
  if (deps.testHooks.enabled) {
    const fault = injectedFault(deps.testHooks, req.method ?? "GET", (req.url ?? "").split("?")[0]!, req.headers.prefer);
    if (fault) throw fault;
  }
  const version = requestVersion(req);
  const query = parseQuery(search);
  // The credential, scope and workspace are checked before a byte of the body is read:
  // an anonymous caller never makes the simulator hold its body.
  const caller = dispatcher.authorize(match, req.headers, query);
  const body = await readJsonBody(req);
  (req as { parsedBody?: unknown }).parsedBody = body;
  await dispatcher.run(match, { method: req.method ?? "GET", headers: req.headers, body }, res, query, version, caller);
}

function requestVersion(req: IncomingMessage) {
  let versionHeader: string | undefined;
  for (const name of VERSION_HEADERS) {
    const v = req.headers[name];
    versionHeader ??= Array.isArray(v) ? v[0] : v;
  }
  return resolveVersion(versionHeader);
}

/** The version is checked before the body is read (an invalid version is a 400 whatever the body). */
function run(
  dispatcher: Dispatcher,
  match: Match,
  req: IncomingMessage,
  res: ServerResponse,
  search: string,
  body: unknown,
  version = requestVersion(req),
): void | Promise<void> {
  (req as { parsedBody?: unknown }).parsedBody = body;
  const view: RequestView = { method: req.method ?? "GET", headers: req.headers, body };
  return dispatcher.run(match, view, res, parseQuery(search), version);
}

/** Query strings as Express's simple parser gives them: repeated keys become arrays. */
export function parseQuery(search: string): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  if (!search) return query;
  for (const [key, value] of new URLSearchParams(search)) {
    const prev = query[key];
    query[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return query;
}

/** A JSON body (application/json or +json), like express.json(): other types and empty bodies give undefined. */
function readJsonBody(req: IncomingMessage): Promise<unknown> {
  if (!hasBody(req)) return Promise.resolve(undefined);
  const type = req.headers["content-type"] ?? "";
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > BODY_LIMIT) return Promise.reject(new ApiError("payload_too_large", "request body too large", { headers: { Connection: "close" } }));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT) {
        reject(new ApiError("payload_too_large", "request body too large", { headers: { Connection: "close" } }));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("error", reject);
    req.on("end", () => {
      if (!/^application\/([\w.-]+\+)?json\b/i.test(type)) return resolve(undefined);
      const text = Buffer.concat(chunks).toString("utf8");
      if (text.trim() === "") return resolve(undefined);
      try {
        resolve(JSON.parse(text));
      } catch (err) {
        reject(errors.badRequest(`invalid JSON body: ${(err as Error).message}`));
      }
    });
  });
}

function toApiError(deps: FrontDeps, err: unknown, req: IncomingMessage): ApiError {
  if (err instanceof ApiError) return err;
  deps.logger.error({ err, method: req.method, url: redactUrl(req.url ?? "") }, "request failed");
  return errors.internal("internal error");
}

function fail(res: ServerResponse, err: unknown, noStore = false): void {
  const apiError = err instanceof ApiError ? err : errors.internal("internal error");
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (noStore) res.setHeader("Cache-Control", "no-store");
  if (apiError.headers) for (const [k, v] of Object.entries(apiError.headers)) res.setHeader(k, v);
  const text = JSON.stringify(renderError(apiError));
  res.statusCode = apiError.status;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(text));
  res.end(text);
}

// Successes at info: a person running `npm start` sees each request as one compact line (log-format.ts).
const levelOf = (status: number) => (status >= 500 ? "error" : status >= 400 ? "warn" : "info");

/**
 * The request's log line once its reply is finished, when the line's level
 * is on; with it off (a success below debug) no listener is added at all.
 */
function logWhenFinished(deps: FrontDeps, req: IncomingMessage, res: ServerResponse, started: bigint): void {
  if (!deps.logger.isLevelEnabled(levelOf(res.statusCode))) return;
  if (res.writableFinished) logLine(deps, req, res, started);
  else res.once("finish", () => logLine(deps, req, res, started));
}

function logLine(deps: FrontDeps, req: IncomingMessage, res: ServerResponse, started: bigint): void {
  const level = levelOf(res.statusCode);
  // Redacting the URL costs more than the rest of a get: only for a line that will be written.
  if (!deps.logger.isLevelEnabled(level)) return;
  const ms = Math.round(Number(process.hrtime.bigint() - started) / 1e5) / 10;
  deps.logger[level]({ method: req.method, url: redactUrl(req.url ?? ""), status: res.statusCode, ms }, "request");
}
