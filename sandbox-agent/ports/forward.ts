import { request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { pipeline } from "node:stream";
import { flushUnlessBodyFollows } from "../../src/early-head.js";
import { AUTH_HEADERS, secretsEqual } from "../../src/auth.js";
import { upgradeRequestHead, withoutHopByHop } from "../../src/hop-by-hop.js";
import type { Logger } from "../../src/logging.js";
import { rawReply, spliceSockets } from "../../src/tunnel.js";
import { connectLocal, failedToAnswer, nobodyListening, parsePortPath } from "./target.js";

/**
 * `/port/{n}/...`: the request goes to 127.0.0.1:n inside the sandbox (what
 * `sandbox.fetch(port, path)` and the code interpreter use; on the platform
 * this route belongs to the edge, control-plane.md §1.5, sandbox-agent.md §9).
 * Method, path after the port, query, end-to-end headers and body go as they
 * came, streamed both ways (node:http piping keeps backpressure, so memory
 * holds a few socket buffers whatever the body's size); an upgrade request
 * (WebSocket, hot reload) becomes a raw socket pipe. The agent's own
 * credential is for the agent: the header that carried it is not forwarded,
 * every other one (the app's Authorization, cookies) is.
 */

/** The auth headers whose bearer token is the agent's: proof of access here, never passed on. */
export function agentCredentialHeaders(headers: IncomingHttpHeaders, token: string | undefined): Set<string> {
  const carrying = new Set<string>();
  if (!token) return carrying;
  for (const name of AUTH_HEADERS) {
    const value = headers[name];
    const raw = Array.isArray(value) ? value[0] : value;
    const given = raw ? /^Bearer\s+(.+)$/i.exec(raw.trim())?.[1]?.trim() : undefined;
    if (given && secretsEqual(given, token)) carrying.add(name);
  }
  return carrying;
}

export interface PortForwarder {
  /** Serves the request when it is for /port/{n}; false leaves it to the rest of the app. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** The server's `upgrade` event. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export interface PortForwarderOptions {
  /**
   * Without a token: why a request a web page may have made is refused
   * (guardUnauthenticated's Host and Origin checks), or undefined.
   * /port runs before the app's middleware, so it asks itself.
   */
  browserRefusal?: (headers: IncomingHttpHeaders) => string | undefined;
  logger?: Logger;
}

export function createPortForwarder(token: string | undefined, options: PortForwarderOptions = {}): PortForwarder {
  const { browserRefusal, logger } = options;
  const denied = (carrying: Set<string>) => Boolean(token) && carrying.size === 0;

  function handle(req: IncomingMessage, res: ServerResponse): boolean {
    const target = parsePortPath(req.url ?? "/");
    if (!target) return false;
    const carrying = agentCredentialHeaders(req.headers, token);
    if (denied(carrying)) {
      reply(res, 401, { error: "missing or invalid bearer token: send Authorization: Bearer <token>" });
      req.resume();
      return true;
    }
    const refused = browserRefusal?.(req.headers);
    if (refused) {
      reply(res, 403, { error: refused });
      req.resume();
      return true;
    }
    connectLocal(target.port).then(
      (socket) => {
        if (res.destroyed) return void socket.destroy();
        const upReq = request({ createConnection: () => socket, method: req.method, path: target.path, headers: withoutHopByHop(req.headers, carrying) });
        upReq.on("response", (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, withoutHopByHop(upRes.headers));
          // A streamed reply (server-sent events, logs) reaches the caller before its first byte; a small one
          // leaves with its head in one write.
          flushUnlessBodyFollows(upRes, res);
          pipeline(upRes, res, () => {});
        });
        upReq.on("error", (err: NodeJS.ErrnoException) => {
          if (res.headersSent || res.destroyed) return void res.destroy();
          reply(res, 502, { error: failedToAnswer(target.port, err) });
        });
        res.on("close", () => {
          if (!res.writableFinished) upReq.destroy();
        });
        pipeline(req, upReq, (err) => {
          if (err) upReq.destroy();
        });
      },
      (err: NodeJS.ErrnoException) => {
        logger?.debug({ port: target.port, err: err.code }, "port forward: nothing listening");
        req.resume();
        reply(res, 502, { error: nobodyListening(target.port, err) });
      },
    );
    return true;
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => socket.destroy());
    const target = parsePortPath(req.url ?? "/");
    if (!target) return rawReply(socket, 404, { error: `no upgrade route for ${req.url}: only /port/{n}/... upgrades` });
    const carrying = agentCredentialHeaders(req.headers, token);
    if (denied(carrying)) return rawReply(socket, 401, { error: "missing or invalid bearer token: send Authorization: Bearer <token>" });
    const refused = browserRefusal?.(req.headers);
    if (refused) return rawReply(socket, 403, { error: refused });
    connectLocal(target.port).then(
      (upstream) => {
        if (socket.destroyed) return void upstream.destroy();
        upstream.write(upgradeRequestHead(req.method ?? "GET", target.path, req.rawHeaders, carrying));
        if (head.length > 0) upstream.write(head);
        spliceSockets(socket, upstream);
      },
      (err: NodeJS.ErrnoException) => rawReply(socket, 502, { error: nobodyListening(target.port, err) }),
    );
  }

  return { handle, upgrade };
}

function reply(res: ServerResponse, status: number, body: { error: string }): void {
  if (res.headersSent) return void res.destroy();
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" });
  res.end(text);
}
