import { createServer, type Server, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "./logging.js";

export interface Serving {
  server: Server;
  url: string;
  port: number;
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), then closes the rest. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Listens with timeouts fit for long streamed uploads and downloads: no
 * overall request timeout (it would cut a large part mid-way), but a bound on
 * slow headers.
 */
export function listen(handler: RequestListener, host: string, port: number): Promise<Serving> {
  const server = createServer(handler);
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
            const force = setTimeout(() => server.closeAllConnections(), graceMs);
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
