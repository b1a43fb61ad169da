import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/** RFC 9110 §7.6.1: connection-specific headers a proxy must not forward, plus any the Connection header names. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

function named(connection: string | string[] | undefined): Set<string> {
  const value = Array.isArray(connection) ? connection.join(",") : (connection ?? "");
  return new Set(
    value
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

/** End-to-end headers only (what a proxy forwards), minus `alsoDrop` (lower-case names). */
export function withoutHopByHop(headers: IncomingHttpHeaders, alsoDrop: ReadonlySet<string> = new Set()): OutgoingHttpHeaders {
  const dropped = named(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || dropped.has(name) || alsoDrop.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/**
 * The head of a WebSocket (or other) upgrade request as raw bytes for the
 * next hop: the request line, then every header but `drop` (lower-case names)
 * in the order and spelling the caller sent, then `add`. The Connection and
 * Upgrade headers stay: the next hop needs them to switch protocols.
 */
export function upgradeRequestHead(method: string, path: string, rawHeaders: string[], drop: ReadonlySet<string>, add: Record<string, string> = {}): string {
  const lines = [`${method} ${path} HTTP/1.1`];
  const replaced = new Set(Object.keys(add).map((k) => k.toLowerCase()));
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (drop.has(lower) || replaced.has(lower)) continue;
    lines.push(`${name}: ${rawHeaders[i + 1]}`);
  }
  for (const [name, value] of Object.entries(add)) lines.push(`${name}: ${value}`);
  return `${lines.join("\r\n")}\r\n\r\n`;
}
