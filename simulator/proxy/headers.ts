import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/** RFC 9110 §7.6.1: connection-specific headers a proxy must not forward, plus any the Connection header names. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"]);

/** The caller's credentials for the simulator; the agent gets the per-sandbox token instead. */
const CALLER_CREDENTIALS = new Set(["authorization", "x-blaxel-authorization", "x-service-authorization", "cookie"]);

function named(connection: string | string[] | undefined): Set<string> {
  const value = Array.isArray(connection) ? connection.join(",") : (connection ?? "");
  return new Set(value.split(",").map((t) => t.trim().toLowerCase()).filter(Boolean));
}

function withoutHopByHop(headers: IncomingHttpHeaders, alsoDrop: Set<string> = new Set()): OutgoingHttpHeaders {
  const dropped = named(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || dropped.has(name) || alsoDrop.has(name)) continue;
    out[name] = value;
  }
  return out;
}

export interface ForwardContext {
  token: string;
  /** host:port of the agent, for the Host header it expects. */
  upstreamHost: string;
  clientAddress: string | undefined;
  originalHost: string | undefined;
}

/** Request headers for the agent: end-to-end headers only, the caller's credentials replaced by the sandbox's token. */
export function requestHeaders(headers: IncomingHttpHeaders, ctx: ForwardContext): OutgoingHttpHeaders {
  const out = withoutHopByHop(headers, CALLER_CREDENTIALS);
  out.host = ctx.upstreamHost;
  out.authorization = `Bearer ${ctx.token}`;
  const prior = headers["x-forwarded-for"];
  out["x-forwarded-for"] = [prior, ctx.clientAddress].flat().filter(Boolean).join(", ");
  out["x-forwarded-host"] = ctx.originalHost ?? "";
  out["x-forwarded-proto"] = "http";
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
