import type { RequestHandler } from "express";
import { bearerToken, secretsEqual } from "../../src/auth.js";
import { errors } from "../../src/errors.js";

/**
 * CORS as the reference daemon does it (any origin, OPTIONS answered 204 before
 * anything else), plus the headers the SDK actually sends.
 */
export function cors(): RequestHandler {
  return (req, res, next) => {
    res.set({
      "Access-Control-Allow-Origin": "*",
      "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, HEAD, OPTIONS",
      "Access-Control-Allow-Headers":
        "Content-Type, Authorization, X-Blaxel-Authorization, X-Service-Authorization, X-Blaxel-Workspace, X-Service-Workspace, Blaxel-Version, Service-Version, X-Blaxel-Preview-Token",
      "Access-Control-Expose-Headers": "Content-Disposition, Content-Length",
    });
    if (req.method === "OPTIONS") {
      res.status(204).end();
      return;
    }
    next();
  };
}

/** Sandbox state changes under the client: never let anything cache a reply. */
export function noCache(): RequestHandler {
  return (_req, res, next) => {
    res.set({
      "Cache-Control": "no-cache, no-store, must-revalidate",
      Pragma: "no-cache",
      Expires: "0",
      "X-Content-Type-Options": "nosniff",
    });
    next();
  };
}

/**
 * Bearer-token auth on every route but /health. The token may come in
 * Authorization, X-Blaxel-Authorization (what @blaxel/core sends) or
 * X-Service-Authorization (the seed's spelling); compared in constant time.
 */
export function requireToken(token: string | undefined): RequestHandler {
  return (req, _res, next) => {
    if (!token || req.path === "/health") return next();
    const given = bearerToken(req.headers);
    if (!given) throw errors.unauthorized("missing bearer token: send Authorization: Bearer <token>");
    if (!secretsEqual(given, token)) throw errors.unauthorized("invalid token");
    next();
  };
}
