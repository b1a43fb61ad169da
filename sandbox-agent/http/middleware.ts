import type { IncomingHttpHeaders } from "node:http";
import type { RequestHandler } from "express";
import { bearerToken, isLoopbackHost, secretsEqual } from "../../src/auth.js";
import { ApiError, errors } from "../../src/errors.js";
import { fromInsideSandbox } from "./in-sandbox-port.js";

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
    // The in-sandbox listener's callers are the sandbox's own processes (in-sandbox-port.ts).
    if (!token || req.path === "/health" || fromInsideSandbox(req)) return next();
    const given = bearerToken(req.headers);
    if (!given) throw errors.unauthorized("missing bearer token: send Authorization: Bearer <token>");
    if (!secretsEqual(given, token)) throw errors.unauthorized("invalid token");
    next();
  };
}

/** `host[:port]` or `[v6]:port` → the host part. */
export function hostOf(header: string): string {
  const v6 = /^\[([^\]]+)\](:\d+)?$/.exec(header);
  if (v6) return v6[1]!;
  return header.replace(/:\d+$/, "");
}

/** Loopback addresses, `localhost` and `*.localhost` (RFC 6761: browsers never send those names to DNS). */
export function isLoopbackName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  return isLoopbackHost(h) || h.endsWith(".localhost");
}

/** Body types the API reads (JSON, a file as raw bytes or a form); text/plain and urlencoded are not among them. */
const ACCEPTED_BODY = /^(application\/json|application\/[\w.+-]+\+json|application\/octet-stream|multipart\/form-data)\s*(;|$)/i;

/**
 * An agent without a token answers whoever reaches it, and a web page in a
 * browser on the same machine can reach a loopback port. Three checks keep a
 * page from driving it:
 * - no CORS headers at all, so a page cannot read any answer;
 * - the Host header must name the loopback (a page that rebinds its own DNS
 *   name to 127.0.0.1 still sends its own name), and a cross-origin `Origin`
 *   is refused — browsers send it on every non-GET request, tools do not;
 * - a body must be JSON (or a file upload's type): a "simple" `text/plain`
 *   POST, which browsers send without asking, is 415.
 */
export function guardUnauthenticated(): RequestHandler {
  return (req, _res, next) => {
    const refused = browserRefusal(req.headers);
    if (refused) throw errors.forbidden(refused);
    const hasBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
    if (hasBody && !ACCEPTED_BODY.test(req.headers["content-type"] ?? "")) {
      throw new ApiError("unsupported_media_type", `Content-Type "${req.headers["content-type"] ?? ""}" is not accepted: send application/json`);
    }
    next();
  };
}

/**
 * The Host and Origin checks of guardUnauthenticated, alone: why a request
 * that may come from a web page is refused, or undefined. `/port/{n}` applies
 * them too (its bodies are the in-sandbox app's, of any type).
 */
export function browserRefusal(headers: IncomingHttpHeaders): string | undefined {
  const host = headers.host;
  if (!host || !isLoopbackName(hostOf(host))) {
    return `Host "${host ?? ""}" is not a loopback name: an agent without a token answers only requests addressed to localhost`;
  }
  const origin = headers.origin;
  if (origin === "null") return "cross-origin request from an opaque origin refused: the agent has no token";
  if (origin !== undefined) {
    let originHost: string | undefined;
    try {
      originHost = new URL(origin).hostname.replace(/^\[|\]$/g, "");
    } catch {
      originHost = undefined;
    }
    if (!originHost || !isLoopbackName(originHost)) return `cross-origin request from ${origin} refused: the agent has no token`;
  }
  return undefined;
}
