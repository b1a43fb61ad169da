import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { STATUS_CODES } from "node:http";
import { resolveSecrets } from "./policy.js";

/** What the egress proxy changes in the messages it forwards (egress-proxy.ts). */

/** Hop-by-hop headers (RFC 9110 §7.6.1) and the proxy's own: never forwarded. */
const HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/**
 * Node's raw header list (name/value pairs as received) as headers to send on,
 * hop-by-hop ones dropped (kept for an upgrade's handshake), `inject`
 * (lower-case names) replacing whatever the client sent under those names;
 * `{{SECRET:name}}` in the client's own values resolved from `secrets` (the
 * destination's routing rules'). HTTP/2 pseudo-headers (`:path`) never pass.
 */
export function forwardHeaders(raw: string[], inject?: Record<string, string>, upgrade = false, secrets?: Record<string, string>): OutgoingHttpHeaders {
  const listed = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") for (const name of raw[i + 1]!.split(",")) listed.add(name.trim().toLowerCase());
  }
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const keep = upgrade ? name === "connection" || name === "upgrade" || !(HOP.has(name) || listed.has(name)) : !(HOP.has(name) || listed.has(name));
    if (!keep || name.startsWith(":") || (inject && name in inject)) continue;
    const value = secrets ? resolveSecrets(raw[i + 1]!, secrets) : raw[i + 1]!;
    const prior = out[name];
    out[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  for (const [name, value] of Object.entries(inject ?? {})) out[name] = value;
  return out;
}

/**
 * The request's body with the routing rules' fields added: a JSON object gets
 * them as members, a form (application/x-www-form-urlencoded) as fields;
 * `{{SECRET:name}}` in the program's own JSON strings and form values is
 * resolved from `secrets`; any other body goes on unchanged. `headers` gets
 * the new length.
 */
export async function injectBody(
  req: AsyncIterable<unknown>,
  headers: OutgoingHttpHeaders,
  fields: Record<string, string>,
  limit: number,
  secrets: Record<string, string> = {},
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error("body too large");
    chunks.push(chunk as Buffer);
  }
  const original = Buffer.concat(chunks);
  const type = String(headers["content-type"] ?? "").toLowerCase();
  const templated = Object.keys(secrets).length > 0 && original.includes("{{");
  let body = original;
  if (Object.keys(fields).length === 0 && !templated) {
    // Nothing to add nor resolve: the body goes on as it came.
  } else if (type.includes("json") || (type === "" && original.length === 0)) {
    try {
      const parsed: unknown = resolveInJson(original.length === 0 ? {} : JSON.parse(original.toString("utf8")), secrets);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
        body = Buffer.from(JSON.stringify({ ...(parsed as object), ...fields }));
        if (type === "") headers["content-type"] = "application/json";
      } else if (templated) body = Buffer.from(JSON.stringify(parsed));
    } catch {
      // Not JSON after all: sent on as it came.
    }
  } else if (type.startsWith("application/x-www-form-urlencoded")) {
    const form = new URLSearchParams([...new URLSearchParams(original.toString("utf8"))].map(([k, v]) => [k, resolveSecrets(v, secrets)]));
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    body = Buffer.from(form.toString());
  }
  delete headers["transfer-encoding"];
  headers["content-length"] = String(body.length);
  return body;
}

/** Every string of a parsed JSON value with `{{SECRET:name}}` resolved (keys are left as written). */
function resolveInJson(value: unknown, secrets: Record<string, string>): unknown {
  if (typeof value === "string") return resolveSecrets(value, secrets);
  if (Array.isArray(value)) return value.map((v) => resolveInJson(v, secrets));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveInJson(v, secrets)]));
  return value;
}

/** The proxy's own answer (a refusal), as plain text. */
export function refusal(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text), "x-sandbox-egress": "refused" }).end(text);
}

/** A response head written on a raw socket (a CONNECT's answer, an upgrade's handshake): `text` sets a plain-text body's length. */
export function rawResponseHead(status: number, text?: string, raw?: string[], message?: string): string {
  const lines = [`HTTP/1.1 ${status} ${message || STATUS_CODES[status] || ""}`];
  if (raw) for (let i = 0; i < raw.length; i += 2) lines.push(`${raw[i]}: ${raw[i + 1]}`);
  if (text !== undefined)
    lines.push("content-type: text/plain; charset=utf-8", `content-length: ${Buffer.byteLength(text)}`, "x-sandbox-egress: refused", "connection: close");
  return `${lines.join("\r\n")}\r\n\r\n`;
}
