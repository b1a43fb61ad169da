import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { withoutHopByHop } from "../../src/hop-by-hop.js";

/** The caller's credentials for the simulator; the agent gets the per-sandbox token instead. */
const CALLER_CREDENTIALS = new Set(["authorization", "x-blaxel-authorization", "x-service-authorization", "cookie"]);

export interface ForwardContext {
  token: string;
  /** host:port of the agent, for the Host header it expects. */
  upstreamHost: string;
  clientAddress: string | undefined;
  originalHost: string | undefined;
}

function forwardedFor(headers: IncomingHttpHeaders, out: OutgoingHttpHeaders, ctx: ForwardContext): void {
  const prior = headers["x-forwarded-for"];
  out["x-forwarded-for"] = [prior, ctx.clientAddress].flat().filter(Boolean).join(", ");
  out["x-forwarded-host"] = ctx.originalHost ?? "";
  out["x-forwarded-proto"] = "http";
}

/** Request headers for the agent: end-to-end headers only, the caller's credentials replaced by the sandbox's token. */
export function requestHeaders(headers: IncomingHttpHeaders, ctx: ForwardContext): OutgoingHttpHeaders {
  const out = withoutHopByHop(headers, CALLER_CREDENTIALS);
  out.host = ctx.upstreamHost;
  out.authorization = `Bearer ${ctx.token}`;
  forwardedFor(headers, out, ctx);
  return out;
}

/**
 * Request headers for a server inside the sandbox (/port/{n}, previews): the
 * app's own Authorization and cookies reach it, and Host stays the caller's
 * (dev servers check it, e.g. Vite's allowedHosts). Only the platform
 * credential the caller authenticated with is dropped (`platformCredential`:
 * a sandbox URL's X-Blaxel-Authorization, or Authorization when it came
 * alone); the agent's token travels in X-Blaxel-Authorization, which the
 * agent's /port route keeps for itself.
 */
export function appRequestHeaders(headers: IncomingHttpHeaders, ctx: ForwardContext, platformCredential: boolean): OutgoingHttpHeaders {
  const drop = new Set<string>();
  if (platformCredential) {
    drop.add("x-blaxel-authorization").add("x-service-authorization");
    if (!headers["x-blaxel-authorization"] && !headers["x-service-authorization"]) drop.add("authorization");
  }
  const out = withoutHopByHop(headers, drop);
  out.host = ctx.originalHost ?? ctx.upstreamHost;
  out["x-blaxel-authorization"] = `Bearer ${ctx.token}`;
  forwardedFor(headers, out, ctx);
  return out;
}

/** Response headers for the caller: end-to-end headers only. */
export function responseHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  return withoutHopByHop(headers);
}

/** The agent's answer to a CORS preflight (sandbox-agent/http/middleware.ts cors()), given by the proxy itself. */
export const SANDBOX_CORS_HEADERS: OutgoingHttpHeaders = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, PUT, DELETE, HEAD, OPTIONS",
  "access-control-allow-headers":
    "Content-Type, Authorization, X-Blaxel-Authorization, X-Service-Authorization, X-Blaxel-Workspace, X-Service-Workspace, Blaxel-Version, Service-Version, X-Blaxel-Preview-Token",
  "access-control-expose-headers": "Content-Disposition, Content-Length",
  "access-control-max-age": "600",
  "cache-control": "no-store",
};
