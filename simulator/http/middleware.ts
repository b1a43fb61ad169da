import type { RequestHandler } from "express";
import { resolveVersion, VERSION_HEADERS } from "../../src/versioning.js";

/** Validates `Blaxel-Version` / `Service-Version` before anything else answers (style §2.13). */
export function apiVersion(): RequestHandler {
  return (req, res, next) => {
    let value: string | undefined;
    for (const name of VERSION_HEADERS) {
      const v = req.headers[name];
      value ??= Array.isArray(v) ? v[0] : v;
    }
    res.locals.apiVersion = resolveVersion(value);
    next();
  };
}

/** Every reply is JSON, including errors and empty bodies (the SDK parses by content type). */
export function jsonContentType(): RequestHandler {
  return (_req, res, next) => {
    res.setHeader("Content-Type", "application/json; charset=utf-8");
    res.setHeader("Cache-Control", "no-store");
    next();
  };
}
