import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";

/** What the egress proxy reads of a request before it forwards it (proxy.ts). */

export type ProxyRequest = IncomingMessage | Http2ServerRequest;

/**
 * Whether a path reaches the simulator's /_sim routes however it is spelled:
 * Express matches routes case-insensitively, after percent-decoding, and a
 * router may fold repeated slashes.
 */
export function isSimRoute(path: string): boolean {
  let pathname = path.split(/[?#]/, 1)[0]!;
  try {
    pathname = decodeURIComponent(pathname);
  } catch {
    return true; // undecodable: never forwarded to the simulator as a /_sim candidate
  }
  return /^\/+_sim(?:\/|$)/i.test(pathname.replace(/\/{2,}/g, "/"));
}

/** Whether a request carries a body (a length or chunked framing; an HTTP/2 stream that has not ended). */
export function hasBody(req: ProxyRequest): boolean {
  const length = req.headers["content-length"];
  if (length !== undefined) return length !== "0";
  if ("stream" in req) return !req.stream.readableEnded && !req.stream.endAfterHeaders;
  return req.headers["transfer-encoding"] !== undefined;
}

/** Bodies whose strings the proxy can resolve secrets in: JSON and forms (injectBody). */
export function rewritable(req: ProxyRequest): boolean {
  const type = String(req.headers["content-type"] ?? "").toLowerCase();
  return type.includes("json") || type.startsWith("application/x-www-form-urlencoded");
}

/** host:port of a CONNECT target or a Host header ("[::1]:80", "example.com"), lower case; undefined when malformed. */
export function authorityOf(text: string, defaultPort: number): { host: string; port: number } | undefined {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/?#@[\]]+)(?::(\d{1,5}))?$/.exec(text);
  if (!match) return undefined;
  const port = match[2] ? Number(match[2]) : defaultPort;
  if (port < 1 || port > 65_535) return undefined;
  return { host: match[1]!.replace(/^\[(.*)\]$/, "$1").toLowerCase(), port };
}
