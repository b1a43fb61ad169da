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
