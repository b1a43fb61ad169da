import { Agent, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { pipeline } from "node:stream";
import { ApiError, errors } from "../../src/errors.js";
import { spliceSockets } from "../../src/tunnel.js";
import { closeRatherThanDrain } from "../http/body-budget.js";
import { agentRequest, endpointHost } from "../launcher/endpoint.js";
import { PortRefused } from "../launcher/port-handoff.js";
import { Coalescer } from "./coalesce.js";
import { flushUnlessBodyFollows } from "../../src/early-head.js";
import { edgeError, edgeErrorReply } from "./edge-errors.js";
import { appRequestHeaders, requestHeaders, responseHeaders, SANDBOX_CORS_HEADERS, type ForwardContext } from "./headers.js";
import { directRequest, directTarget, refuseUpgrade, replyPortRefused, replyServerFailed } from "./port-direct.js";
import { spliceBody, spliceableLength } from "./splice-body.js";
import type { ForwardPlan, SandboxProxy, SandboxProxyOptions, Upstream } from "./proxy-api.js";
import { isPortPath, targetFromHost, targetFromPath, targetFromRunPath, type SandboxTarget } from "./route.js";

/**
 * The sandbox reverse proxy: streams each request to the sandbox's agent (or,
 * for /port/{n} and previews where the launcher can open the port, straight to
 * the in-sandbox server: port-direct.ts) and the reply back, both ways without
 * buffering (node:http piping keeps backpressure, so a 200 MiB upload holds a
 * few socket buffers, not the body). Upgrades (WebSocket) become a raw socket
 * pipe once the next hop answers 101.
 */

/** The proxy's shapes (proxy-api.ts), importable from here as before. */
export type { ForwardPlan, PreviewRouter, SandboxProxy, SandboxProxyOptions, Upstream } from "./proxy-api.js";

function agentDown(target: SandboxTarget, reason: string): ApiError {
  return edgeError(
    "WORKLOAD_UNAVAILABLE",
    errors.serviceUnavailable(`sandbox "${target.sandbox}" in workspace "${target.workspace}" is unavailable: its agent is not answering (${reason})`),
  );
}

/** A CORS preflight carries no credentials by design; the proxy answers it as the agent would. */
function isPreflight(req: IncomingMessage): boolean {
  return req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
}

/** The raw head of a reply relayed on an upgrade request's socket. */
function rawHead(status: number, message: string | undefined, rawHeaders: string[], keepConnection: boolean): string {
  const lines = [`HTTP/1.1 ${status} ${message ?? ""}`];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    if (!keepConnection && (lower === "connection" || lower === "transfer-encoding" || lower === "keep-alive")) continue;
    lines.push(`${rawHeaders[i]}: ${rawHeaders[i + 1]}`);
  }
  if (!keepConnection) lines.push("Connection: close");
  return `${lines.join("\r\n")}\r\n\r\n`;
}

export function createSandboxProxy(options: SandboxProxyOptions): SandboxProxy {
  // Keep-alive connections to the agents: a new TCP handshake per request would cost more than the proxying.
  const agent = new Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 });
  const now = options.now ?? Date.now;

  /** The one place that opens a request to an agent: TCP or its Unix socket (simulator/launcher/endpoint.ts). */
  function upstreamRequest(upstream: Upstream, method: string | undefined, path: string, headers: OutgoingHttpHeaders): ClientRequest {
    return agentRequest(upstream, { method, path, agent, headers });
  }

  function headersFor(req: IncomingMessage, plan: ForwardPlan, upstream: Upstream): OutgoingHttpHeaders {
    const ctx: ForwardContext = {
      token: upstream.token,
      upstreamHost: endpointHost(upstream),
      clientAddress: req.socket.remoteAddress,
      originalHost: req.headers.host,
    };
    const headers = plan.audience === "app" ? appRequestHeaders(req.headers, ctx, plan.platformCredential) : requestHeaders(req.headers, ctx);
    plan.editRequest?.(headers);
    return headers;
  }

  /** Sandbox URLs first (/sbx/..., sbx-* hosts, the run-URL form), then preview URLs; undefined for anything else. */
  function planFor(req: IncomingMessage): Promise<ForwardPlan> | undefined {
    const url = req.url ?? "/";
    if (options.previews?.matches(req)) return Promise.resolve().then(() => options.previews!.plan(req));
    let target: SandboxTarget | undefined;
    try {
      target = targetFromHost(req.headers.host, url, options.workspaceOfId) ?? targetFromPath(url) ?? targetFromRunPath(url);
    } catch (err) {
      // A host name DNS could not carry (400): refused before any lookup or body byte.
      return Promise.reject(err instanceof ApiError ? err : errors.badRequest("Host: invalid"));
    }
    if (!target) return undefined;
    const found = target;
    return (async (): Promise<ForwardPlan> => {
      const audience = isPortPath(found.path) ? "app" : "api";
      // Answered here, the same for every sandbox URL: forwarding it would tell an anonymous
      // caller which sandboxes exist (204 from an agent, 404 without one).
      if (isPreflight(req))
        return { target: found, audience, platformCredential: true, answer: { status: 204, headers: SANDBOX_CORS_HEADERS as Record<string, string> } };
      await options.authorize(req, found);
      return { target: found, audience, platformCredential: true };
    })();
  }

  /** `close`: the request's body is not read, so the connection cannot carry another request. */
  function sendError(req: IncomingMessage, res: ServerResponse, err: ApiError, close = false): void {
    if (res.headersSent) return void res.destroy();
    const reply = edgeErrorReply(err, req, now());
    res.writeHead(reply.status, { ...reply.headers, "content-length": Buffer.byteLength(reply.body), ...(close ? { connection: "close" } : {}) });
    res.end(reply.body);
  }

  function asApiError(err: unknown): ApiError {
    if (err instanceof ApiError) return err;
    options.logger?.error({ err }, "sandbox proxy failed");
    return errors.internal((err as Error)?.message ?? String(err));
  }

  /**
   * The request to the next hop: the in-sandbox server itself over a connection the launcher
   * opened (port-direct.ts, one hop), else the agent. Rejects with PortRefused (nothing listens
   * on the port) or an ApiError 503 (the sandbox cannot be asked).
   */
  async function openUpstream(
    req: IncomingMessage,
    plan: ForwardPlan,
    upstream: Upstream,
    extraHeaders: OutgoingHttpHeaders = {},
  ): Promise<{ upReq: ClientRequest; direct?: { port: number } }> {
    const headers = Object.assign(headersFor(req, plan, upstream), extraHeaders);
    const direct = directTarget(plan.audience, plan.target.path, upstream.openPort !== undefined);
    if (!direct) return { upReq: upstreamRequest(upstream, req.method, plan.target.path, headers) };
    const socket = await upstream.openPort!(direct.port).catch((err: Error) => {
      if (err instanceof PortRefused) throw err;
      throw agentDown(plan.target, err.message);
    });
    return { upReq: directRequest(socket, req.method, direct.path, headers, upstream.token), direct };
  }

  async function forward(req: IncomingMessage, res: ServerResponse, plan: ForwardPlan): Promise<void> {
    const upstream = await options.upstream(plan.target);
    const release = options.inUse?.(plan.target);
    if (release) res.once("close", release);
    let opened: Awaited<ReturnType<typeof openUpstream>>;
    try {
      opened = await openUpstream(req, plan, upstream);
    } catch (err) {
      if (err instanceof PortRefused) return replyPortRefused(req, res, err, plan.replyHeaders);
      throw err;
    }
    const { upReq, direct } = opened;
    if (res.destroyed) return void upReq.destroy(); // the caller left while the connection was being opened
    // A large upload to the in-sandbox server moves in the kernel (splice-body.ts) where it can.
    const length = direct ? spliceableLength(req) : undefined;
    const spliced = length === undefined ? undefined : spliceBody(req, res, upReq, length);
    upReq.on("response", (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, { ...responseHeaders(upRes.headers), ...plan.replyHeaders });
      flushUnlessBodyFollows(upRes, res);
      pipeline(upRes, res, () => {});
    });
    upReq.on("error", (err: NodeJS.ErrnoException) => {
      if (res.headersSent || res.destroyed) return void res.destroy();
      if (direct) return replyServerFailed(res, direct.port, err, plan.replyHeaders);
      options.logger?.warn({ sandbox: plan.target.sandbox, workspace: plan.target.workspace, err: err.message }, "sandbox agent unreachable");
      sendError(req, res, agentDown(plan.target, err.code ?? err.message));
    });
    // The caller going away (a cut upload, a closed log stream) ends the next hop's side too.
    res.on("close", () => {
      spliced?.stop(); // the reply is over or the caller left: a body still moving is not wanted any more
      if (!res.writableFinished) upReq.destroy();
    });
    const done = (err: Error | null | undefined) => {
      if (err) upReq.destroy();
    };
    // Straight to the app, the body is a raw stream. To the agent, larger writes cost it less per MiB than one chunk per 64 KiB socket read (see Coalescer).
    if (spliced) return;
    if (direct) pipeline(req, upReq, done);
    else pipeline(req, new Coalescer(), upReq, done);
  }

  function handle(req: IncomingMessage, res: ServerResponse): boolean {
    const planned = planFor(req);
    if (!planned) return false;
    planned
      .then((plan) => {
        if (!plan.answer) return forward(req, res, plan);
        req.resume();
        res.writeHead(plan.answer.status, plan.answer.headers).end();
      })
      .catch((err: unknown) => {
        // A body refused before it was read (401/403/404): a small one is drained, a large one closes the connection.
        const close = closeRatherThanDrain(req);
        if (!close) req.resume();
        sendError(req, res, asApiError(err), close);
      });
    return true;
  }

  function refuse(req: IncomingMessage, socket: Duplex, err: ApiError): void {
    if (socket.destroyed) return;
    const reply = edgeErrorReply(err, req, now());
    const head = Object.entries({ ...reply.headers, "content-length": String(Buffer.byteLength(reply.body)), connection: "close" }).map(
      ([k, v]) => `${k}: ${v}`,
    );
    socket.end(`HTTP/1.1 ${reply.status} ${err.code}\r\n${head.join("\r\n")}\r\n\r\n${reply.body}`);
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const planned = planFor(req);
    if (!planned) return false;
    socket.on("error", () => socket.destroy());
    planned
      .then(async (plan) => {
        const upstream = await options.upstream(plan.target);
        const release = options.inUse?.(plan.target);
        if (release) socket.once("close", release);
        let upReq: ClientRequest;
        try {
          ({ upReq } = await openUpstream(req, plan, upstream, { connection: "Upgrade", upgrade: req.headers.upgrade ?? "websocket" }));
        } catch (err) {
          if (err instanceof PortRefused) return refuseUpgrade(socket, err);
          throw err;
        }
        if (socket.destroyed) return void upReq.destroy();
        upReq.on("upgrade", (upRes, upSocket, upHead) => {
          if (socket.destroyed) return void upSocket.destroy();
          socket.write(rawHead(101, upRes.statusMessage, upRes.rawHeaders, true));
          if (upHead.length > 0) socket.write(upHead);
          if (head.length > 0) upSocket.write(head);
          spliceSockets(socket, upSocket);
          if (options.markInUse) {
            const timer = setInterval(() => options.markInUse!(plan.target), options.inUseEveryMs ?? 30_000);
            timer.unref();
            socket.once("close", () => clearInterval(timer));
          }
        });
        // The agent or the app refused the upgrade (401, 404, 502...): its reply goes back as it is.
        upReq.on("response", (upRes) => {
          socket.write(rawHead(upRes.statusCode ?? 502, upRes.statusMessage, upRes.rawHeaders, false));
          pipeline(upRes, socket, () => {});
        });
        upReq.on("error", (err: NodeJS.ErrnoException) => refuse(req, socket, agentDown(plan.target, err.code ?? err.message)));
        socket.on("close", () => upReq.destroy());
        upReq.end();
      })
      .catch((err: unknown) => refuse(req, socket, asApiError(err)));
    return true;
  }

  return {
    handle,
    upgrade,
    middleware: () => (req, res, next) => {
      if (!handle(req, res)) next();
    },
    close: () => agent.destroy(),
  };
}
