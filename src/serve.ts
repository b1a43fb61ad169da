import { lstatSync, unlinkSync } from "node:fs";
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
  return serve(handler, (server, ready) => server.listen(port, host, ready), (server) => {
    const addr = server.address() as AddressInfo;
    const shownHost = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
    return { url: `http://${shownHost}:${addr.port}`, port: addr.port };
  });
}

/**
 * Listens on a Unix socket (an agent inside an isolating launcher: the
 * simulator reaches it through the socket's directory, bound out of the
 * sandbox). A socket file a previous run left behind is replaced; any other
 * kind of file at the path is an error. `url` is `unix:<path>`, `port` 0.
 */
export function listenSocket(handler: RequestListener, path: string): Promise<Serving> {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  return serve(handler, (server, ready) => server.listen(path, ready), () => ({ url: `unix:${path}`, port: 0 }));
}

function serve(handler: RequestListener, start: (server: Server, ready: () => void) => void, address: (server: Server) => { url: string; port: number }): Promise<Serving> {
  const server = createServer(handler);
  server.requestTimeout = 0;
  server.headersTimeout = 30_000;
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    start(server, () => {
      server.off("error", reject);
      resolve({
        server,
        ...address(server),
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
