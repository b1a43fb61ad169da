import { lstatSync, readFileSync, unlinkSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type RequestListener, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { AddressInfo, Socket } from "node:net";
import type { Logger } from "./logging.js";

export interface Serving {
  server: Server;
  url: string;
  port: number;
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), then closes the rest. */
  stop(graceMs?: number): Promise<void>;
}

/** A request listener that also serves upgrades (WebSocket): listen() gives it the server's `upgrade` event. */
export interface UpgradeListener {
  onUpgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

export interface ListenOptions {
  /** A request's headers must arrive within this (reference: ReadHeaderTimeout 30 s); also cuts connections that never send. */
  headersTimeoutMs?: number;
  /** A keep-alive connection idle between requests is closed after this (reference: IdleTimeout 2 min). */
  idleTimeoutMs?: number;
  /** A request body that sends nothing for this long is cut (a never-ending trickle holds no socket for ever). */
  bodyIdleTimeoutMs?: number;
  /** Open connections beyond which the oldest idle ones are closed to admit new ones (default: from RLIMIT_NOFILE). */
  maxConnections?: number;
  /** How often expired headers are looked for (Node's default is 30 s). */
  checkIntervalMs?: number;
}

/** Set on a connection whose request body is read by something other than Node (the proxy's kernel splice): the body idle sweep leaves it alone. */
export const BODY_HANDED_OFF = Symbol("body handed off");

export const DEFAULT_LISTEN: Required<Omit<ListenOptions, "maxConnections">> = {
  headersTimeoutMs: 30_000,
  idleTimeoutMs: 120_000,
  bodyIdleTimeoutMs: 120_000,
  checkIntervalMs: 5_000,
};

/** The open-files soft limit (Node raises it to the hard limit at start-up), or undefined off Linux. */
export function openFilesLimit(limitsFile = "/proc/self/limits"): number | undefined {
  try {
    const line = readFileSync(limitsFile, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    return soft && /^\d+$/.test(soft) ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}

/** Connections the server admits: what the fd limit leaves after a reserve for files, processes' output and SQLite. */
export function defaultMaxConnections(limit = openFilesLimit()): number {
  if (limit === undefined) return 10_000;
  return Math.max(64, limit - Math.max(256, Math.floor(limit / 4)));
}

/**
 * Listens with timeouts fit for long streams (as the reference
 * daemon: a bound on headers and on idle keep-alive connections, none on a
 * response, so log streams and downloads last as long as they need) plus a
 * bound on a body that stops arriving. Connections are capped below the fd
 * limit; at the cap the oldest connections with no request in flight are
 * closed to admit the new one, so /health keeps answering under a flood of
 * idle sockets. A handler with `onUpgrade` (UpgradeListener) serves upgrade
 * requests too; without one, Node refuses them by closing the socket.
 */
export function listen(handler: RequestListener & UpgradeListener, host: string, port: number, options: ListenOptions = {}): Promise<Serving> {
  return serve(
    handler,
    options,
    (server, ready) => server.listen(port, host, ready),
    (server) => {
      const addr = server.address() as AddressInfo;
      const shownHost = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      return { url: `http://${shownHost}:${addr.port}`, port: addr.port };
    },
  );
}

/**
 * Listens on a Unix socket (an agent inside an isolating launcher: the
 * simulator reaches it through the socket's directory, bound out of the
 * sandbox). A socket file a previous run left behind is replaced; any other
 * kind of file at the path is an error. `url` is `unix:<path>`, `port` 0.
 */
export function listenSocket(handler: RequestListener & UpgradeListener, path: string, options: ListenOptions = {}): Promise<Serving> {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  return serve(
    handler,
    options,
    (server, ready) => server.listen(path, ready),
    () => ({ url: `unix:${path}`, port: 0 }),
  );
}

/**
 * Serves on a listening socket made elsewhere (an agent host's socket inside a sandbox's network namespace,
 * simulator/agent-host/netns.ts): the server takes the descriptor over and closes it when stopped.
 */
export function listenOnDescriptor(handler: RequestListener & UpgradeListener, fd: number, url: string, options: ListenOptions = {}): Promise<Serving> {
  return serve(
    handler,
    options,
    (server, ready) => server.listen({ fd }, ready),
    () => ({ url, port: 0 }),
  );
}

type Start = (server: Server, ready: () => void) => void;
type Address = (server: Server) => { url: string; port: number };

function serve(handler: RequestListener & UpgradeListener, options: ListenOptions, start: Start, address: Address): Promise<Serving> {
  const o = { ...DEFAULT_LISTEN, ...options };
  const server = createServer(
    { connectionsCheckingInterval: o.checkIntervalMs, headersTimeout: o.headersTimeoutMs, requestTimeout: 0, keepAliveTimeout: o.idleTimeoutMs },
    handler,
  );
  const cap = options.maxConnections ?? defaultMaxConnections();
  const inFlight = new Map<Socket, number>(); // insertion order = oldest first
  const neverAsked = new Map<Socket, number>(); // connected at, until the first request
  const bodies = new Map<Socket, { bytesRead: number; since: number }>(); // requests whose body is still arriving
  server.on("connection", (socket: Socket) => {
    if (inFlight.size >= cap) evictIdle(inFlight, Math.max(1, Math.floor(cap / 100)));
    if (inFlight.size >= cap) {
      socket.destroy(); // every connection is busy: refuse this one rather than run out of descriptors
      return;
    }
    inFlight.set(socket, 0);
    socket.once("close", () => {
      inFlight.delete(socket);
      neverAsked.delete(socket);
      bodies.delete(socket);
    });
    neverAsked.set(socket, Date.now());
  });
  // A connection that never sends a request is cut after the headers timeout (Node's own check misses
  // some of them), a body that sends nothing for bodyIdleTimeoutMs likewise. Polled, not socket timers:
  // a response taking its time must never be cut, and socket timeouts proved unreliable here.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [socket, at] of neverAsked) {
      if (at > now - o.headersTimeoutMs) break;
      neverAsked.delete(socket);
      socket.destroy();
    }
    for (const [socket, seen] of bodies) {
      if (BODY_HANDED_OFF in socket) continue; // read by someone else, who bounds its idleness (simulator/proxy/splice.ts)
      if (socket.bytesRead !== seen.bytesRead) bodies.set(socket, { bytesRead: socket.bytesRead, since: now });
      else if (o.bodyIdleTimeoutMs > 0 && now - seen.since >= o.bodyIdleTimeoutMs) {
        bodies.delete(socket);
        socket.destroy();
      }
    }
  }, o.checkIntervalMs);
  sweep.unref();
  server.once("close", () => clearInterval(sweep));
  // Upgraded sockets (WebSocket) leave the server's request tracking: never cut as idle, and kept here so
  // stop() can end them too.
  const upgraded = new Set<Duplex>();
  const onUpgrade = handler.onUpgrade;
  if (onUpgrade) {
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      neverAsked.delete(socket as Socket);
      inFlight.set(socket as Socket, 1);
      upgraded.add(socket);
      socket.once("close", () => upgraded.delete(socket));
      onUpgrade(req, socket, head);
    });
  }
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    neverAsked.delete(socket);
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    res.once("close", () => {
      if (inFlight.has(socket)) inFlight.set(socket, Math.max(0, (inFlight.get(socket) ?? 1) - 1));
    });
    if (!req.complete) {
      bodies.set(socket, { bytesRead: socket.bytesRead, since: Date.now() });
      const done = () => bodies.delete(socket);
      req.once("end", done);
      req.once("close", done);
    }
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    start(server, () => {
      server.off("error", reject);
      resolve({
        server,
        ...address(server),
        stop: (graceMs = 10_000) =>
          new Promise<void>((done) => {
            const force = setTimeout(() => {
              server.closeAllConnections();
              for (const socket of upgraded) socket.destroy();
            }, graceMs);
            force.unref();
            // Responses that finish during the grace leave keep-alive sockets behind: close them as they go idle.
            const sweep = setInterval(() => server.closeIdleConnections(), 50);
            sweep.unref();
            server.close(() => {
              clearTimeout(force);
              clearInterval(sweep);
              done();
            });
            server.closeIdleConnections();
          }),
      });
    });
  });
}

function evictIdle(inFlight: Map<Socket, number>, count: number): void {
  let evicted = 0;
  for (const [socket, busy] of inFlight) {
    if (evicted >= count) return;
    if (busy > 0) continue;
    inFlight.delete(socket);
    socket.destroy();
    evicted++;
  }
}

/**
 * Runs `shutdown` once on SIGTERM or SIGINT, then exits. A second signal
 * while it runs exits at once (status 130), as a second Ctrl-C should.
 */
export function onShutdownSignal(logger: Logger, shutdown: () => Promise<void>): void {
  let stopping = false;
  const handle = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(130);
    }
    stopping = true;
    logger.info({ signal }, "shutting down");
    shutdown()
      .then(() => process.exit(0))
      .catch((err) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      });
  };
  process.on("SIGTERM", handle);
  process.on("SIGINT", handle);
}
