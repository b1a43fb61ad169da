import { createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { connect, isIP, type Socket } from "node:net";
import { TLSSocket } from "node:tls";
import type { Duplex } from "node:stream";
import type { Logger } from "../../src/logging.js";
import type { EgressCa } from "./ca.js";
import { guardedLookup, HostOnlyDestination, isHostOnly } from "./destinations.js";
import { H2Front } from "./h2.js";
import { decide, hasSecrets, injectionFor, type EgressPolicy, type Injection } from "./policy.js";
import { asSimulatorRequest, type SimulatorHandler } from "./in-process.js";
import { forwardHeaders, injectBody, rawResponseHead, refusal } from "./messages.js";
import { authorityOf, hasBody, isSimRoute, rewritable, type ProxyRequest } from "./requests.js";

export { isSimRoute } from "./requests.js";

/**
 * The egress proxy: every connection a sandbox's program opens to the
 * simulator's address inside its sandbox (the gateway) ends here, tagged with
 * the sandbox it came from. A connection may speak TLS to the proxy itself
 * (HTTPS_PROXY is an https:// URL, as on the platform; a program reaching a
 * simulator's host over https by its URL does too): its first byte tells,
 * and TLS is terminated with a certificate of the simulator's CA (ca.ts) for
 * the name it asked (SNI). Inside, three kinds of request, parsed by Node's
 * own HTTP server:
 *  - origin-form (`GET /v0/sandboxes`, a preview path): the simulator's own
 *    surface, as users reach it outside; `/_sim/*` never;
 *  - absolute-form (`GET http://host/...`, HTTP_PROXY): forwarded;
 *  - CONNECT host:port (HTTPS_PROXY): tunnelled as is, or, when a routing
 *    rule applies to the host or the host is the simulator's, terminated with
 *    a certificate of the simulator's CA and served as above, over HTTP/2
 *    when the client offers it (h2.ts).
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
/** The first byte of a TLS handshake record (RFC 8446 §5.1): a connection that starts with it speaks TLS to the proxy. */
const TLS_HANDSHAKE = 0x16;
/** The name the proxy's certificate carries when the client sends none (HTTPS_PROXY names 127.0.0.1). */
const PROXY_NAME = "127.0.0.1";

type ProxyResponse = ServerResponse | Http2ServerResponse;

export class EgressProxy {
  private readonly server = createServer({ requestTimeout: 0, keepAliveTimeout: 60_000 });
  private readonly origins = new WeakMap<Duplex, Origin>();
  /** Upgraded connections handed to the simulator: out of the server's tracking, ended by close(). */
  private readonly upgraded = new Set<Duplex>();
  private readonly h2 = new H2Front<Origin>((req, res, origin) => this.onH2Request(req, res, origin));

  constructor(private readonly deps: EgressProxyDeps) {
    this.server.on("request", (req, res) => this.onRequest(req, res));
    this.server.on("connect", (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onConnect(req, socket, head));
    this.server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on("clientError", (_err, socket: Duplex) => socket.destroy());
  }

  /** A connection from inside `client`'s sandbox (the gateway's listener accepted it): TLS to the proxy, or plain HTTP. */
  accept(socket: Socket, client: EgressClient): void {
    socket.setNoDelay(true);
    socket.on("error", () => socket.destroy()); // a program that resets its connection ends only that connection
    socket.once("data", (first: Buffer) => {
      // Peeked, then put back: the TLS layer or the HTTP parser reads it again (the socket resumes once it has its reader).
      socket.pause();
      socket.unshift(first);
      if (first[0] === TLS_HANDSHAKE) return this.acceptTls(socket, client);
      this.origins.set(socket, { client });
      this.server.emit("connection", socket);
      socket.resume();
    });
  }

  /**
   * TLS to the proxy itself, with a certificate for the name the client asked (SNI), else for 127.0.0.1. A name
   * the sandbox's policy refuses fails the handshake, as a firewall would cut it; so does any name when the
   * policy's firewall allows only the proxy (`rulesets: ["proxy"]`): HTTPS straight to a host bypasses it.
   */
  private acceptTls(socket: Socket, client: EgressClient): void {
    const tls = new TLSSocket(socket, {
      isServer: true,
      secureContext: this.deps.ca.contextFor(PROXY_NAME),
      ALPNProtocols: ["http/1.1"],
      SNICallback: (name, done) => {
        const refusal = isIP(name) === 0 ? this.directRefusal(client, name.toLowerCase()) : undefined;
        if (refusal) {
          this.deps.logger.info({ workspace: client.workspace, sandbox: client.sandbox, host: name }, refusal);
          return done(new Error(refusal));
        }
        done(null, this.deps.ca.contextFor(name));
      },
    });
    tls.on("error", () => tls.destroy());
    this.origins.set(tls, { client });
    this.server.emit("connection", tls);
  }

  private directRefusal(client: EgressClient, host: string): string | undefined {
    const policy = this.deps.policyOf(client);
    if (policy?.proxyOnly) return "egress blocked: HTTPS straight to a host bypasses the proxy (firewall ruleset proxy)";
    return decide(policy, host).allowed ? undefined : "egress blocked by the sandbox's network policy";
  }

  close(): void {
    this.server.closeAllConnections();
    this.h2.close();
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

  /** A stream of an HTTP/2 session on an intercepted tunnel: one request to the tunnel's destination, sent on over HTTP/1.1. */
  private onH2Request(req: Http2ServerRequest, res: Http2ServerResponse, origin: Origin): void {
    const tunnel = origin.tunnel!;
    const path = req.headers[":path"] ?? "/";
    const no = this.refused(origin, tunnel.host, tunnel.port, path);
    if (no) return refusal(res as unknown as ServerResponse, no.status, no.text);
    const authority = req.headers[":authority"] ?? req.headers.host;
    const target: Target = { secure: true, host: tunnel.host, port: tunnel.port, path, authority };
    void this.forward(req, res, origin, target, injectionFor(this.deps.policyOf(origin.client), tunnel.host));
  }

  private async forward(req: ProxyRequest, res: ProxyResponse, origin: Origin, target: Target, injection: Injection | undefined): Promise<void> {
    const toSimulator = this.deps.isSimulator(target.host, target.port);
    const headers: OutgoingHttpHeaders = forwardHeaders(req.rawHeaders, injection?.headers, false, injection?.secrets);
    if (target.authority) headers.host = target.authority;
    const h1 = !("stream" in req);
    const inProcess = toSimulator && h1 ? this.deps.simulatorHandler?.() : undefined;
    // The body is read whole only where a rule adds fields to it or the program may have written a secret's name in it.
    const rewritesBody = injection !== undefined && (Object.keys(injection.body).length > 0 || (hasSecrets(injection) && hasBody(req) && rewritable(req)));
    if (inProcess && !rewritesBody) return inProcess.request(asSimulatorRequest(req as IncomingMessage, headers, target.path), res as ServerResponse);
    let body: Buffer | undefined;
    if (rewritesBody) {
      body = await injectBody(req, headers, injection.body, MAX_INJECTED_BODY, injection.secrets).catch(() => undefined);
      if (!body) return refusal(res as ServerResponse, 413, "The request body is too large for the sandbox's routing rules\n");
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
      // HTTP/2 has no reason phrase (RFC 9113 §8.3.2): only an HTTP/1.1 reply carries it on.
      if (h1) (res as ServerResponse).writeHead(reply.statusCode ?? 502, reply.statusMessage, forwardHeaders(reply.rawHeaders));
      else (res as Http2ServerResponse).writeHead(reply.statusCode ?? 502, forwardHeaders(reply.rawHeaders) as Record<string, string | string[]>);
      reply.pipe(res as NodeJS.WritableStream);
    });
    upstream.on("error", (err: NodeJS.ErrnoException) => {
      this.deps.logger.debug(
        { workspace: origin.client.workspace, sandbox: origin.client.sandbox, host: target.host, err: err.code ?? err.message },
        "egress upstream failed",
      );
      if (res.headersSent) return void (res as ServerResponse).destroy();
      refusal(
        res as ServerResponse,
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
      const tls = new TLSSocket(socket, { isServer: true, secureContext: this.deps.ca.contextFor(host), ALPNProtocols: ["h2", "http/1.1"] });
      tls.on("error", () => tls.destroy());
      const inner: Origin = { client: origin.client, tunnel: { host, port } };
      this.origins.set(tls, inner);
      // The protocol is known once the handshake has chosen it (ALPN): HTTP/2 to its own server, else HTTP/1.1.
      tls.once("secure", () => (tls.alpnProtocol === "h2" ? this.h2.accept(tls, inner) : this.server.emit("connection", tls)));
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
    const injection = injectionFor(this.deps.policyOf(origin.client), target.host);
    const headers = forwardHeaders(req.rawHeaders, injection?.headers, true, injection?.secrets);
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
