import { Agent, type IncomingMessage, type ServerResponse } from "node:http";
import { pipeline } from "node:stream";
import { ApiError, errors } from "../../src/errors.js";
import type { Logger } from "../../src/logging.js";
import { agentRequest, endpointHost, type AgentEndpoint } from "../launcher/endpoint.js";
import { Coalescer } from "./coalesce.js";
import { requestHeaders, responseHeaders } from "./headers.js";
import { targetFromHost, targetFromPath, type SandboxTarget } from "./route.js";

/**
 * The sandbox reverse proxy: streams each request to the sandbox's agent and
 * the reply back, both ways without buffering (node:http piping keeps
 * backpressure, so a 200 MiB upload holds a few socket buffers, not the body).
 */

/** The agent's endpoint (TCP URL, or Unix socket with a nominal URL) and the sandbox's token. */
export interface Upstream extends AgentEndpoint {
  token: string;
}

export interface SandboxProxyOptions {
  /** Checks the caller's credential for the target's workspace; throws ApiError 401/403. */
  authorize(req: IncomingMessage, target: SandboxTarget): void | Promise<void>;
  /** The running agent for the target; throws ApiError 404 (no such sandbox) or 503 (its agent is down). */
  upstream(target: SandboxTarget): Upstream | Promise<Upstream>;
  /** Workspace name for a workspace id, for host-name routing. */
  workspaceOfId(id: string): string | undefined;
  logger?: Logger;
}

export interface SandboxProxy {
  /** Serves the request and returns true when it is for a sandbox; false leaves it to the caller. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Express-style middleware over handle(). */
  middleware(): (req: IncomingMessage, res: ServerResponse, next: () => void) => void;
  close(): void;
}

function sendError(res: ServerResponse, err: ApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: err.code, code: err.status, message: err.message });
  res.writeHead(err.status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "cache-control": "no-store", ...err.headers });
  res.end(body);
}

function agentDown(target: SandboxTarget, reason: string): ApiError {
  return errors.serviceUnavailable(`sandbox "${target.sandbox}" in workspace "${target.workspace}" is unavailable: its agent is not answering (${reason})`);
}

/** A CORS preflight carries no credentials by design; the agent answers it. */
function isPreflight(req: IncomingMessage): boolean {
  return req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
}

export function createSandboxProxy(options: SandboxProxyOptions): SandboxProxy {
  // Keep-alive connections to the agents: a new TCP handshake per request would cost more than the proxying.
  const agent = new Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 });

  async function forward(req: IncomingMessage, res: ServerResponse, target: SandboxTarget): Promise<void> {
    if (!isPreflight(req)) await options.authorize(req, target);
    const upstream = await options.upstream(target);
    const upReq = agentRequest(upstream, {
      method: req.method,
      path: target.path,
      agent,
      headers: requestHeaders(req.headers, { token: upstream.token, upstreamHost: endpointHost(upstream), clientAddress: req.socket.remoteAddress, originalHost: req.headers.host }),
    });
    upReq.on("response", (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, responseHeaders(upRes.headers));
      res.flushHeaders(); // streamed replies (process logs) must reach the caller before their first byte
      pipeline(upRes, res, () => {});
    });
    upReq.on("error", (err) => {
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      options.logger?.warn({ sandbox: target.sandbox, workspace: target.workspace, err: err.message }, "sandbox agent unreachable");
      sendError(res, agentDown(target, (err as NodeJS.ErrnoException).code ?? err.message));
    });
    // The caller going away (a cut upload, a closed log stream) ends the agent's side too.
    res.on("close", () => {
      if (!res.writableFinished) upReq.destroy();
    });
    // Larger writes cost the agent less per MiB than one chunk per 64 KiB socket read (see Coalescer).
    pipeline(req, new Coalescer(), upReq, (err) => {
      if (err) upReq.destroy();
    });
  }

  function handle(req: IncomingMessage, res: ServerResponse): boolean {
    const target = targetFromHost(req.headers.host, req.url ?? "/", options.workspaceOfId) ?? targetFromPath(req.url ?? "/");
    if (!target) return false;
    forward(req, res, target).catch((err: unknown) => {
      const apiErr = err instanceof ApiError ? err : errors.internal((err as Error)?.message ?? String(err));
      if (!(err instanceof ApiError)) options.logger?.error({ err }, "sandbox proxy failed");
      req.resume(); // drain the unread body so the connection can be reused
      sendError(res, apiErr);
    });
    return true;
  }

  return {
    handle,
    middleware: () => (req, res, next) => {
      if (!handle(req, res)) next();
    },
    close: () => agent.destroy(),
  };
}
