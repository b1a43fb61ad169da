import type { Api } from "../api.js";

/**
 * A short-lived credential for one terminal connection: a WebSocket cannot
 * carry the Authorization header, and the console's key must never appear in
 * a URL. The sandbox's session (a private preview of the sandbox API on port
 * 443, what `sandbox.sessions.create()` makes) is made once and kept; each
 * connection gets a new token of it that expires in a few minutes (it is
 * checked when the socket opens; an open terminal outlives it).
 */
export const CONSOLE_SESSION = "console-terminal";
const TOKEN_LIFETIME_MS = 5 * 60_000;

interface PreviewToken {
  spec: { token: string; expiresAt: string };
}

export async function terminalToken(api: Api, workspace: string, sandbox: string): Promise<string> {
  const previews = `/v0/sandboxes/${encodeURIComponent(sandbox)}/previews`;
  try {
    await api.get(`${previews}/${CONSOLE_SESSION}`, { workspace });
  } catch (err) {
    if ((err as { status?: number }).status !== 404) throw err;
    await api.json("POST", previews, { workspace, body: { metadata: { name: CONSOLE_SESSION }, spec: { port: 443, public: false } } });
  }
  const token = await api.json<PreviewToken>("POST", `${previews}/${CONSOLE_SESSION}/tokens`, {
    workspace,
    body: { metadata: { name: `token-${Date.now()}` }, spec: { expiresAt: new Date(Date.now() + TOKEN_LIFETIME_MS).toISOString() } },
  });
  return token.spec.token;
}
