import type { IncomingMessage } from "node:http";
import { secretsEqual } from "../../src/auth.js";

/**
 * Preview tokens: what a private preview accepts (the platform's docs: the
 * `X-Blaxel-Preview-Token` header, which SandboxInstance.fromSession sends, or
 * the `bl_preview_token` query parameter; here also the cookie of that name
 * the simulator sets when a browser came with the query parameter, so the
 * page's own requests for its assets work).
 */

export const TOKEN_HEADER = "x-blaxel-preview-token";
export const TOKEN_PARAM = "bl_preview_token";

export interface PresentedToken {
  value: string;
  from: "header" | "query" | "cookie";
}

export function cookieValue(cookie: string | undefined, name: string): string | undefined {
  for (const pair of (cookie ?? "").split(";")) {
    const at = pair.indexOf("=");
    if (at !== -1 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/** The Cookie header without the preview token's pair; undefined when nothing else is left. */
export function cookieWithout(cookie: string | undefined, name: string): string | undefined {
  const kept = (cookie ?? "")
    .split(";")
    .map((p) => p.trim())
    .filter((p) => p && p.slice(0, p.indexOf("=")).trim() !== name);
  return kept.length > 0 ? kept.join("; ") : undefined;
}

export function presentedToken(req: IncomingMessage): PresentedToken | undefined {
  const header = req.headers[TOKEN_HEADER];
  const fromHeader = Array.isArray(header) ? header[0] : header;
  if (fromHeader) return { value: fromHeader.trim(), from: "header" };
  const url = req.url ?? "";
  const queryAt = url.indexOf("?");
  if (queryAt !== -1) {
    const value = new URLSearchParams(url.slice(queryAt + 1)).get(TOKEN_PARAM);
    if (value) return { value, from: "query" };
  }
  const cookie = cookieValue(req.headers.cookie, TOKEN_PARAM);
  return cookie ? { value: cookie, from: "cookie" } : undefined;
}

export interface TokenDoc {
  metadata: { name: string };
  spec: { token?: string; expiresAt?: string };
}

/** The token the value belongs to, when it has not expired at `now` (the simulator's clock). */
export function matchingToken<T extends TokenDoc>(tokens: T[], value: string, now: number): { token: T; expiresMs: number } | undefined {
  for (const token of tokens) {
    if (!token.spec.token || !secretsEqual(value, token.spec.token)) continue;
    const expiresMs = Date.parse(token.spec.expiresAt ?? "");
    return Number.isFinite(expiresMs) && expiresMs > now ? { token, expiresMs } : undefined;
  }
  return undefined;
}
