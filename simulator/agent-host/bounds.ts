import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { UpgradeListener } from "../../src/serve.js";

/**
 * What one sandbox's requests may take of the agent host, so that a sandbox flooding its own API (a thousand
 * parallel requests, a client that never reads) leaves the other sandboxes' latency as it was: a request of a
 * sandbox waits in that sandbox's own queue, never behind another's.
 */
export interface RequestBounds {
  /**
   * Requests of one sandbox handled at once. A response that streams (logs, watch, downloads) stops counting
   * once its headers are out: it then costs what it sends, which its client's reading bounds.
   */
  maxActive: number;
  /** Requests waiting beyond those; one more is answered 429 at once. */
  maxQueued: number;
  /** Open connections of one sandbox's listeners (the oldest idle ones are closed to admit new ones). */
  maxConnections: number;
}

export const DEFAULT_BOUNDS: RequestBounds = { maxActive: 32, maxQueued: 2_048, maxConnections: 2_048 };

/** `handler` behind one sandbox's queue (upgrades, WebSocket terminals and proxied ports, go straight through). */
export function boundRequests(
  handler: RequestListener,
  onUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void,
  bounds: RequestBounds,
): RequestListener & UpgradeListener {
  let active = 0;
  const waiting: (() => void)[] = [];

  const next = () => {
    while (active < bounds.maxActive && waiting.length > 0) waiting.shift()!();
  };

  const run = (req: IncomingMessage, res: ServerResponse) => {
    if (res.destroyed) return; // its client left while it waited
    active++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      active--;
      next();
    };
    res.once("close", release);
    const writeHead = res.writeHead;
    res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse["writeHead"]>) {
      res.writeHead = writeHead;
      const out = writeHead.apply(this, args);
      release();
      return out;
    } as ServerResponse["writeHead"];
    try {
      handler(req, res);
    } catch {
      // The agent's app answers its own errors; one escaping it fails this request only.
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" }).end('{"error":"internal error"}');
      else res.destroy();
    }
  };

  const bounded: RequestListener & UpgradeListener = (req, res) => {
    if (active < bounds.maxActive) return run(req, res);
    if (waiting.length >= bounds.maxQueued) {
      res
        .writeHead(429, { "content-type": "application/json", "retry-after": "1" })
        .end(JSON.stringify({ error: `too many requests in flight for this sandbox (${bounds.maxActive} handled, ${bounds.maxQueued} waiting)` }));
      return;
    }
    waiting.push(() => run(req, res));
  };
  bounded.onUpgrade = onUpgrade;
  return bounded;
}
