import type { IncomingMessage } from "node:http";
import type { RequestHandler } from "express";
import { ApiError } from "../../src/errors.js";

/**
 * Bodies read before any credential is checked (the OAuth endpoints, and
 * whatever /v0 route Express answers 404) are small and share one budget
 * (100 anonymous 9.9 MB bodies at once cost +793 MB before the
 * 401). A body declared over `perRequest` is a 413 before a byte is read;
 * when the bytes reserved by bodies in flight would pass `total`, a 503 with
 * Retry-After. Either way the connection closes rather than draining the body.
 * A chunked body reserves `perRequest` (the parsers' own limit then applies).
 */
export interface BodyBudgetOptions {
  perRequest: number;
  total: number;
}

export const UNAUTHENTICATED_BODIES: BodyBudgetOptions = { perRequest: 64 * 1024, total: 4 * 1024 * 1024 };

export function unauthenticatedBodyBudget(options: BodyBudgetOptions = UNAUTHENTICATED_BODIES): RequestHandler {
  let reserved = 0;
  return (req, res, next) => {
    const chunked = req.headers["transfer-encoding"] !== undefined;
    const declared = Number(req.headers["content-length"] ?? 0);
    if (!chunked && !(declared > 0)) return next();
    const close = { Connection: "close" };
    if (declared > options.perRequest) {
      return next(new ApiError("payload_too_large", `request body too large: at most ${options.perRequest} bytes before authentication`, { headers: close }));
    }
    const size = chunked ? options.perRequest : declared;
    if (reserved + size > options.total) {
      return next(
        new ApiError("service_unavailable", "too many unauthenticated request bodies in flight; retry shortly", { headers: { ...close, "Retry-After": "1" } }),
      );
    }
    reserved += size;
    res.once("close", () => (reserved -= size));
    next();
  };
}

/** Unread bodies up to this size are drained after a refusal, so the client reads its 401 cleanly. */
const DRAIN_AT_MOST = 1024 * 1024;

export function hasBody(req: IncomingMessage): boolean {
  return req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
}

/**
 * A request refused before its body was read: a small body is drained (read
 * and dropped, never held) so the connection stays usable; a large or chunked
 * one closes the connection instead of being received for nothing.
 */
export function closeRatherThanDrain(req: IncomingMessage): boolean {
  if (req.readableEnded || !hasBody(req)) return false;
  return req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"]) > DRAIN_AT_MOST;
}
