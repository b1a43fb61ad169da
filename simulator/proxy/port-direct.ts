import { request, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { failedToAnswer, parsePortPath } from "../../sandbox-agent/ports/target.js";
import { rawReply } from "../../src/tunnel.js";
import { closeRatherThanDrain } from "../http/body-budget.js";
import type { PortRefused } from "../launcher/port-handoff.js";

/**
 * /port/{n} and previews in one hop. When the sandbox's launcher can open a
 * connection to a port inside it (Upstream.openPort: simulator/launcher/types.ts),
 * the proxy speaks HTTP to the in-sandbox server over that connection itself
 * instead of asking the agent's /port/{n} to, and does what that route does
 * (sandbox-agent/ports/forward.ts): the header carrying the agent's token is
 * not sent, one request per connection (Connection: close), the same 502
 * `{error}` bodies when nothing listens or the server drops the request.
 */

/** Port and path on the in-sandbox server for a request that can go in one hop; undefined = through the agent. */
export function directTarget(audience: "api" | "app", path: string, canOpen: boolean): { port: number; path: string } | undefined {
  return audience === "app" && canOpen ? parsePortPath(path) : undefined;
}

/** The request to the in-sandbox server over `socket` (headers as built for the agent, its token taken out). */
export function directRequest(socket: Socket, method: string | undefined, path: string, headers: OutgoingHttpHeaders, agentToken: string): ClientRequest {
  if (headers["x-blaxel-authorization"] === `Bearer ${agentToken}`) delete headers["x-blaxel-authorization"];
  return request({ createConnection: () => socket, method, path, headers });
}

function agentStyleError(
  res: ServerResponse,
  status: number,
  message: string,
  replyHeaders: Record<string, string | string[]> | undefined,
  close: boolean,
): void {
  if (res.headersSent) return void res.destroy();
  const body = JSON.stringify({ error: message });
  res.writeHead(status, {
    "content-type": "application/json",
    "cache-control": "no-store",
    ...replyHeaders,
    "content-length": Buffer.byteLength(body),
    ...(close ? { connection: "close" } : {}),
  });
  res.end(body);
}

/** Nothing listens on the port: the agent's 502 (with the preview's reply headers, as on any reply); the unread body is drained or the connection closed. */
export function replyPortRefused(req: IncomingMessage, res: ServerResponse, err: PortRefused, replyHeaders?: Record<string, string | string[]>): void {
  const close = closeRatherThanDrain(req);
  if (!close) req.resume();
  agentStyleError(res, 502, err.message, replyHeaders, close);
}

/** The in-sandbox server dropped the request before its reply's head: the agent's 502. */
export function replyServerFailed(res: ServerResponse, port: number, err: NodeJS.ErrnoException, replyHeaders?: Record<string, string | string[]>): void {
  agentStyleError(res, 502, failedToAnswer(port, err), replyHeaders, true);
}

/** An upgrade for a port nothing listens on: the agent's raw 502. */
export function refuseUpgrade(socket: Duplex, err: PortRefused): void {
  rawReply(socket, 502, { error: err.message });
}
