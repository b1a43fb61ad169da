import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from "express";
import { z } from "zod";
import { ApiError, errors } from "./errors.js";
import { redactUrl, type Logger } from "./logging.js";

/**
 * Parses `value` with `schema`, or throws a 400 naming the first offending
 * field: `body.parts[2].etag: expected string`.
 */
export function parse<S extends z.ZodType>(schema: S, value: unknown, where: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw errors.badRequest(describeZodError(result.error, where));
}

export function describeZodError(error: z.ZodError, where: string): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => {
      const path = [where, ...issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))].join("").replace(/^\./, "");
      if (issue.code === "unrecognized_keys") return `${path}: unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
      return `${path}: ${issue.message}`;
    })
    .join("; ");
}

/** Renders an ApiError into the program's wire shape. */
export type ErrorRenderer = (err: ApiError) => Record<string, unknown>;

/**
 * The one place errors become responses: ApiError → its status; body-parser
 * errors → 400/413; anything else → 500 without a stack trace, logged once.
 */
export function errorMiddleware(render: ErrorRenderer, logger: Logger): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const apiError = toApiError(err);
    // 501 is a route the program will never have, not a fault: no error log.
    if (apiError.status >= 500 && apiError.status !== 501) logger.error({ err, method: req.method, url: redactUrl(req.originalUrl) }, "request failed");
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (apiError.headers) res.set(apiError.headers);
    res.status(apiError.status).json(render(apiError));
  };
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { type?: string; status?: number; message?: string };
  // body-parser (express.json) errors carry a `type` and a 4xx status.
  // SQLite out of room (disk full or max_page_count): like a file write on a full disk.
  if ((err as { code?: string })?.code === "SQLITE_FULL") return errors.insufficientStorage("the agent's database is full: no space left on device");
  // A path Express could not percent-decode (e.g. overlong UTF-8 `%c0%ae`): URIError with status 400.
  if (err instanceof URIError) return errors.badRequest(`invalid percent-encoding in the URL: ${err.message}`);
  if (e?.type === "entity.too.large") return errors.payloadTooLarge("request body too large");
  if (e?.type === "entity.parse.failed") return errors.badRequest(`invalid JSON body: ${e.message}`);
  if (e?.type && typeof e.status === "number" && e.status < 500) return new ApiError("bad_request", e.message ?? "bad request", { status: e.status });
  return errors.internal("internal error");
}

/** JSON 404 for unmatched routes (Express's default is HTML). */
export function notFoundHandler(): RequestHandler {
  return (req) => {
    throw errors.notFound(`no route for ${req.method} ${req.path}`);
  };
}

/** One access-log line per finished request. */
export function accessLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    res.on("finish", () => {
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      const line = { method: req.method, url: redactUrl(req.originalUrl), status: res.statusCode, ms: Math.round(ms * 10) / 10 };
      if (res.statusCode >= 500) logger.error(line, "request");
      else if (res.statusCode >= 400) logger.warn(line, "request");
      else logger.debug(line, "request");
    });
    next();
  };
}

/** Parses a query-string boolean explicitly (z.coerce.boolean turns "false" into true). */
export function queryBool(value: unknown): boolean {
  return value === "true" || value === "1" || value === "";
}
