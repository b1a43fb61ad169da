import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";

/**
 * The simulator's own HTTP handler, called in this process for the requests a
 * sandbox sends to the simulator's surface (its API, sandbox URLs, previews):
 * the egress proxy's parsed request is handed over as it is, instead of being
 * written again to the simulator's listener over loopback and parsed a second
 * time (for an intercepted HTTPS request, that second hop cost more than the
 * decryption; docs/proxy.md, "bench:proxy: the egress line").
 */
export interface SimulatorHandler {
  request(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** Headers Node's parser keeps the first of when repeated (IncomingMessage.headers); others it joins. */
const SINGLE = new Set([
  "age",
  "authorization",
  "content-length",
  "content-type",
  "etag",
  "expires",
  "from",
  "host",
  "if-modified-since",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "proxy-authorization",
  "referer",
  "retry-after",
  "server",
  "user-agent",
]);

/**
 * Rewrites the request as the simulator's listener would have received it
 * from the proxy: `headers` (hop-by-hop ones dropped, routing rules' injected,
 * an absolute-form request's authority as Host) and the origin-form `path`.
 */
export function asSimulatorRequest(req: IncomingMessage, headers: OutgoingHttpHeaders, path: string): IncomingMessage {
  const parsed: IncomingHttpHeaders = {};
  const raw: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const values = Array.isArray(value) ? value.map(String) : [String(value)];
    for (const v of values) raw.push(name, v);
    (parsed as Record<string, string | string[]>)[name] = SINGLE.has(name)
      ? values[0]!
      : name === "set-cookie"
        ? values
        : values.join(name === "cookie" ? "; " : ", ");
  }
  // The body is still framed as the client sent it (the proxy's parser reads it): its Transfer-Encoding stays so the handler sees a body.
  const framing = req.headers["transfer-encoding"];
  if (framing !== undefined && parsed["transfer-encoding"] === undefined) {
    parsed["transfer-encoding"] = framing;
    raw.push("transfer-encoding", framing);
  }
  req.headers = parsed;
  req.rawHeaders = raw;
  req.url = path;
  return req;
}
