import { createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import { connect, isIP, type Socket } from "node:net";
import { TLSSocket } from "node:tls";
import type { Duplex } from "node:stream";
import type { Logger } from "../../src/logging.js";
import type { EgressCa } from "./ca.js";
import { guardedLookup, HostOnlyDestination, isHostOnly } from "./destinations.js";
import { decide, injectionFor, type EgressPolicy, type Injection } from "./policy.js";
import { asSimulatorRequest, type SimulatorHandler } from "./in-process.js";
import { forwardHeaders, injectBody, rawResponseHead, refusal } from "./messages.js";

/**
 * The egress proxy: every connection a sandbox's program opens to the
 * simulator's address inside its sandbox (the gateway) ends here, tagged with
 * the sandbox it came from. It serves three kinds of request on that one
 * address, parsed by Node's own HTTP server:
 *  - origin-form (`GET /v0/sandboxes`, a preview path): the simulator's own
 *    surface, as users reach it outside; `/_sim/*` never;
 *  - absolute-form (`GET http://host/...`, HTTP_PROXY): forwarded;
 *  - CONNECT host:port (HTTPS_PROXY): tunnelled as is, or, when a routing
 *    rule applies to the host or the host is the simulator's, terminated with
 *    a certificate of the simulator's CA (ca.ts) and served as above.
 * Each request first passes the sandbox's policy (policy.ts), read anew per
 * request and per tunnel so a PUT of spec.network applies at once.
 */

export interface EgressClient {
  workspace: string;
  /** The sandbox, or `job-<job>-<task>` for a job's task. */
  sandbox: string;
  /** A job's task: no sandbox's policy applies to it. */
  job?: boolean;
}

export interface EgressProxyDeps {
  ca: Pick<EgressCa, "contextFor">;
  logger: Logger;
  /** The sandbox's current policy (undefined: none). */
  policyOf(client: EgressClient): EgressPolicy | undefined;
  /** Whether host:port names the simulator (its public URL's host, 127.0.0.1/localhost, preview hosts). */
  isSimulator(host: string, port: number): boolean;
  /** Where the simulator listens, for the requests routed to it. */
  simulatorAddress(): { host: string; port: number };
  /** The simulator's own handler in this process (undefined: not yet serving): requests for it are handed over, not sent over loopback. */
  simulatorHandler?(): SimulatorHandler | undefined;
  /** False when sandboxes have no outbound network (--sandbox-network none): only the simulator is reachable. */
  outbound: boolean;
}

interface Origin {
  client: EgressClient;
  /** An intercepted CONNECT: the destination its requests go to (over TLS). */
  tunnel?: { host: string; port: number };
}

interface Target {
  secure: boolean;
  host: string;
  port: number;
  path: string;
  /** An absolute-form request's authority: it replaces the Host the client sent (RFC 9112 §3.2.2). */
  authority?: string;
}

const MAX_INJECTED_BODY = 16 * 1024 * 1024;

export class EgressProxy {
  private readonly server = createServer({ requestTimeout: 0, keepAliveTimeout: 60_000 });
  private readonly origins = new WeakMap<Duplex, Origin>();
  /** Upgraded connections handed to the simulator: out of the server's tracking, ended by close(). */
  private readonly upgraded = new Set<Duplex>();

  constructor(private readonly deps: EgressProxyDeps) {
    this.server.on("request", (req, res) => this.onRequest(req, res));
    this.server.on("connect", (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onConnect(req, socket, head));
    this.server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on("clientError", (_err, socket: Duplex) => socket.destroy());
  }

  /** A connection from inside `client`'s sandbox (the gateway's listener accepted it). */
  accept(socket: Socket, client: EgressClient): void {
    socket.setNoDelay(true);
    socket.on("error", () => socket.destroy()); // a program that resets its connection ends only that connection
    this.origins.set(socket, { client });
    this.server.emit("connection", socket);
  }

  close(): void {
    this.server.closeAllConnections();
    for (const socket of this.upgraded) socket.destroy();
  }

  private targetOf(req: IncomingMessage, origin: Origin): Target | undefined {
    const url = req.url ?? "/";
    if (origin.tunnel) return { secure: true, host: origin.tunnel.host, port: origin.tunnel.port, path: url };
    if (url.startsWith("/")) {
      const sim = this.deps.simulatorAddress();
      const authority = authorityOf(req.headers.host ?? "", sim.port);
      return authority && { secure: false, host: authority.host, port: authority.port, path: url };
    }
    try {
      const parsed = new URL(url);
      if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return undefined;
      const secure = parsed.protocol === "https:";
      return {
        secure,
        host: parsed.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase(),
        port: Number(parsed.port) || (secure ? 443 : 80),
        path: `${parsed.pathname}${parsed.search}`,
        authority: parsed.host,
      };
    } catch {
      return undefined;
    }
  }

  /** The policy's answer for a request or tunnel to host:port; undefined when it may go, else the refusal's status and text. */
  private refused(origin: Origin, host: string, port: number, path?: string): { status: number; text: string } | undefined {
    const log = { workspace: origin.client.workspace, sandbox: origin.client.sandbox, host, port };
    const verdict = decide(this.deps.policyOf(origin.client), host);
    if (!verdict.allowed) {
      this.deps.logger.info({ ...log, rule: verdict.rule }, "egress blocked by the sandbox's network policy");
      return { status: 403, text: `Blocked by the sandbox's network policy (${verdict.rule}): ${verdict.reason}\n` };
    }
    if (this.deps.isSimulator(host, port)) {
      if (path !== undefined && isSimRoute(path)) return { status: 403, text: "The simulator's /_sim routes are not reachable from inside a sandbox\n" };
      return undefined;
    }
    if (isHostOnly(host) || host === "localhost" || host.endsWith(".localhost")) {
      this.deps.logger.info(log, "egress to the simulator's host refused");
      return { status: 403, text: `${host}:${port} is the simulator's host, not reachable from a sandbox\n` };
    }
    if (!this.deps.outbound)
      return { status: 403, text: "Sandboxes have no outbound network here (--sandbox-network none): only the simulator is reachable\n" };
    return undefined;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const origin = this.origins.get(req.socket);
    if (!origin) return void req.socket.destroy();
    const target = this.targetOf(req, origin);
    if (!target) return refusal(res, 400, "A proxy request needs an http:// URL and a Host\n");
    const no = this.refused(origin, target.host, target.port, target.path);
    if (no) return refusal(res, no.status, no.text);
    const injection = injectionFor(this.deps.policyOf(origin.client), target.host);
    void this.forward(req, res, origin, target, injection);
  }

  private async forward(req: IncomingMessage, res: ServerResponse, origin: Origin, target: Target, injection: Injection | undefined): Promise<void> {
    const toSimulator = this.deps.isSimulator(target.host, target.port);
    const headers: OutgoingHttpHeaders = forwardHeaders(req.rawHeaders, injection?.headers);
    if (target.authority) headers.host = target.authority;
    const inProcess = toSimulator ? this.deps.simulatorHandler?.() : undefined;
    const injectsBody = injection !== undefined && Object.keys(injection.body).length > 0;
    if (inProcess && !injectsBody) return inProcess.request(asSimulatorRequest(req, headers, target.path), res);
    let body: Buffer | undefined;
    if (injectsBody) {
      body = await injectBody(req, headers, injection.body, MAX_INJECTED_BODY).catch(() => undefined);
      if (!body) return refusal(res, 413, "The request body is too large for the sandbox's routing rules\n");
    }
    const sim = this.deps.simulatorAddress();
    const options = toSimulator
      ? { host: sim.host, port: sim.port, method: req.method, path: target.path, headers }
      : {
          host: target.host,
          port: target.port,
          method: req.method,
          path: target.path,
          headers,
          lookup: guardedLookup,
          servername: isIP(target.host) ? undefined : target.host,
        };
    const upstream = (target.secure && !toSimulator ? httpsRequest : httpRequest)(options, (reply) => {
      res.writeHead(reply.statusCode ?? 502, reply.statusMessage, forwardHeaders(reply.rawHeaders));
      reply.pipe(res);
    });
    upstream.on("error", (err: NodeJS.ErrnoException) => {
      this.deps.logger.debug(
        { workspace: origin.client.workspace, sandbox: origin.client.sandbox, host: target.host, err: err.code ?? err.message },
        "egress upstream failed",
      );
      if (res.headersSent) return void res.destroy();
      refusal(
        res,
        err instanceof HostOnlyDestination ? 403 : 502,
        err instanceof HostOnlyDestination ? `${err.message}\n` : `Cannot reach ${target.host}:${target.port}: ${err.code ?? err.message}\n`,
      );
    });
    res.on("close", () => upstream.destroy());
    if (body) upstream.end(body);
    else req.pipe(upstream);
  }

  private onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => socket.destroy());
    const origin = this.origins.get(socket);
    const authority = authorityOf(req.url ?? "", 443);
    if (!origin || !authority) return void socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    const { host, port } = authority;
    const no = this.refused(origin, host, port);
    if (no) return void socket.end(rawResponseHead(no.status, no.text) + no.text);
    if (head.length > 0) socket.unshift(head);
    const intercept = this.deps.isSimulator(host, port) || injectionFor(this.deps.policyOf(origin.client), host) !== undefined;
    if (intercept) {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      const tls = new TLSSocket(socket, { isServer: true, secureContext: this.deps.ca.contextFor(host), ALPNProtocols: ["http/1.1"] });
      tls.on("error", () => tls.destroy());
      this.origins.set(tls, { client: origin.client, tunnel: { host, port } });
      this.server.emit("connection", tls);
      return;
    }
    const upstream = connect({ host, port, lookup: guardedLookup });
    upstream.setNoDelay(true);
    upstream.once("connect", () => {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      socket.pipe(upstream).pipe(socket);
    });
    upstream.once("error", (err: NodeJS.ErrnoException) => {
      if (upstream.connecting || !upstream.readable) {
        const text = err instanceof HostOnlyDestination ? `${err.message}\n` : `Cannot reach ${host}:${port}: ${err.code ?? err.message}\n`;
        socket.end(rawResponseHead(err instanceof HostOnlyDestination ? 403 : 502, text) + text);
      } else socket.destroy();
    });
    socket.on("close", () => upstream.destroy());
  }

  /** WebSockets (and other upgrades) to the simulator or through the proxy: the handshake forwarded, then bytes both ways. */
  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => socket.destroy());
    const origin = this.origins.get(socket);
    const target = origin && this.targetOf(req, origin);
    if (!origin || !target) return void socket.destroy();
    const no = this.refused(origin, target.host, target.port, target.path);
    if (no) return void socket.end(rawResponseHead(no.status, no.text) + no.text);
    const toSimulator = this.deps.isSimulator(target.host, target.port);
    const sim = this.deps.simulatorAddress();
    const headers = forwardHeaders(req.rawHeaders, injectionFor(this.deps.policyOf(origin.client), target.host)?.headers, true);
    if (target.authority) headers.host = target.authority;
    const inProcess = toSimulator ? this.deps.simulatorHandler?.() : undefined;
    if (inProcess) {
      this.upgraded.add(socket);
      socket.once("close", () => this.upgraded.delete(socket));
      return inProcess.upgrade(asSimulatorRequest(req, headers, target.path), socket, head);
    }
    const options = toSimulator
      ? { host: sim.host, port: sim.port, method: req.method, path: target.path, headers }
      : { host: target.host, port: target.port, method: req.method, path: target.path, headers, lookup: guardedLookup };
    const upstream = (target.secure && !toSimulator ? httpsRequest : httpRequest)(options);
    upstream.on("upgrade", (reply, upSocket, upHead) => {
      socket.write(rawResponseHead(reply.statusCode ?? 101, undefined, reply.rawHeaders, reply.statusMessage));
      if (upHead.length > 0) socket.write(upHead);
      upSocket.pipe(socket).pipe(upSocket);
      upSocket.on("error", () => socket.destroy());
      socket.on("error", () => upSocket.destroy());
    });
    upstream.on("response", (reply) => {
      socket.write(rawResponseHead(reply.statusCode ?? 502, undefined, reply.rawHeaders, reply.statusMessage));
      reply.pipe(socket);
    });
    upstream.on("error", () => socket.destroy());
    if (head.length > 0) upstream.write(head);
    upstream.end();
  }
}

/**
 * Whether a path reaches the simulator's /_sim routes however it is spelled:
 * Express matches routes case-insensitively, after percent-decoding, and a
 * router may fold repeated slashes.
 */
export function isSimRoute(path: string): boolean {
  let pathname = path.split(/[?#]/, 1)[0]!;
  try {
    pathname = decodeURIComponent(pathname);
  } catch {
    return true; // undecodable: never forwarded to the simulator as a /_sim candidate
  }
  return /^\/+_sim(?:\/|$)/i.test(pathname.replace(/\/{2,}/g, "/"));
}

/** host:port of a CONNECT target or a Host header ("[::1]:80", "example.com"), lower case; undefined when malformed. */
function authorityOf(text: string, defaultPort: number): { host: string; port: number } | undefined {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/?#@[\]]+)(?::(\d{1,5}))?$/.exec(text);
  if (!match) return undefined;
  const port = match[2] ? Number(match[2]) : defaultPort;
  if (port < 1 || port > 65_535) return undefined;
  return { host: match[1]!.replace(/^\[(.*)\]$/, "$1").toLowerCase(), port };
}
