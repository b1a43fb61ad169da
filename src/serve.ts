import { createServer, type IncomingMessage, type Server, type RequestListener } from "node:http";
import type { Duplex } from "node:stream";
import type { AddressInfo } from "node:net";
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

/**
 * Listens with timeouts fit for long streamed uploads and downloads: no
 * overall request timeout (it would cut a large part mid-way), but a bound on
 * slow headers. A handler with `onUpgrade` (UpgradeListener) serves upgrade
 * requests too; without one, Node refuses them by closing the socket.
 */
export function listen(handler: RequestListener & UpgradeListener, host: string, port: number): Promise<Serving> {
  const server = createServer(handler);
  // Upgraded sockets leave the server's connection tracking: kept here so stop() can end them too.
  const upgraded = new Set<Duplex>();
  const onUpgrade = handler.onUpgrade;
  if (onUpgrade) {
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      upgraded.add(socket);
      socket.once("close", () => upgraded.delete(socket));
      onUpgrade(req, socket, head);
    });
  }
  server.requestTimeout = 0;
  server.headersTimeout = 30_000;
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      const addr = server.address() as AddressInfo;
      const shownHost = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      resolve({
        server,
        port: addr.port,
        url: `http://${shownHost}:${addr.port}`,
        stop: (graceMs = 10_000) =>
          new Promise<void>((done) => {
            const force = setTimeout(() => {
              server.closeAllConnections();
              for (const socket of upgraded) socket.destroy();
            }, graceMs);
            force.unref();
            server.close(() => {
              clearTimeout(force);
              done();
            });
            server.closeIdleConnections();
          }),
      });
    });
  });
}

/** Runs `shutdown` once on SIGTERM or SIGINT, then exits. */
export function onShutdownSignal(logger: Logger, shutdown: () => Promise<void>): void {
  let stopping = false;
  const handle = (signal: NodeJS.Signals) => {
    if (stopping) return;
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
