import type { IncomingHttpHeaders } from "node:http";
import { bearerToken } from "../../src/auth.js";
import { matchingToken, type TokenDoc } from "../previews/tokens.js";
import type { SandboxTarget } from "../proxy/index.js";
import type { Clock } from "../../src/clock.js";
import type { ResourceStore } from "../store/resources.js";

/**
 * The web terminal's credential in the query string. A WebSocket opened by a
 * browser or by the CLI (`bl connect sandbox`: `wss://<sandbox url>/terminal/ws?token=…`)
 * cannot carry an Authorization header, so on the sandbox URL, for the
 * terminal's two paths only and only when no header carries one, the edge
 * takes `?token=`: a platform credential (API key, access token) or the token
 * of one of the sandbox's sessions (`sandbox.sessions.create()`).
 */
const TERMINAL_PATHS = new Set(["/terminal", "/terminal/ws"]);

/** The `token` query parameter of a terminal path, when no auth header carries a credential; else undefined. */
export function terminalQueryToken(headers: IncomingHttpHeaders, path: string): string | undefined {
  const q = path.indexOf("?");
  if (q < 0 || !TERMINAL_PATHS.has(path.slice(0, q))) return undefined;
  if (bearerToken(headers)) return undefined;
  return new URLSearchParams(path.slice(q + 1)).get("token") || undefined;
}

/** Ports of the sandbox API itself: a preview on them is a session (the SDK's sessions use 443). */
const API_PORTS = new Set([443, 8080]);

interface SessionPreview {
  spec: { port?: number; public?: boolean; expires?: string };
}

/** True when `value` is a live token of a live private preview of the sandbox API (a session) of this very sandbox. */
export function isSessionToken(deps: { resources: ResourceStore; clock: Clock }, target: SandboxTarget, value: string): boolean {
  const now = deps.clock.now();
  for (const preview of deps.resources.allOfKind<SessionPreview>(target.workspace, ["preview"])) {
    if (preview.parent !== target.sandbox || preview.doc.spec.public || !API_PORTS.has(preview.doc.spec.port ?? 80)) continue;
    const expires = preview.doc.spec.expires ? Date.parse(preview.doc.spec.expires) : NaN;
    if (Number.isFinite(expires) && expires <= now) continue;
    const tokens = deps.resources
      .list<TokenDoc>({ workspace: target.workspace, kind: "preview-token", parent: `${target.sandbox}/${preview.name}`, sort: "createdAt:asc" })
      .map((t) => t.doc);
    if (matchingToken(tokens, value, now)) return true;
  }
  return false;
}
