import type { ClientRequest, IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { BODY_HANDED_OFF, DEFAULT_LISTEN } from "../../src/serve.js";
import { canSplice, socketFd, SPLICE_MIN_BYTES, spliceBytes, type SpliceTransfer } from "./splice.js";

/**
 * A request body sent to an in-sandbox server by the kernel (splice.ts) instead
 * of through JS: the bytes Node's parser already took in are written first, then
 * the connection's reads are paused the way Node pauses a connection itself
 * (`_paused`, as for pipelined requests) and the rest of the declared length is
 * spliced from the caller's socket to the sandbox's. Exactly Content-Length
 * bytes move, never what follows them. Node's parser then never sees the body
 * end, so the connection serves no further request: the reply closes it.
 */

/** The body's length when it should be spliced: a Content-Length body of at least SPLICE_MIN_BYTES, not yet read, over a plain socket. */
export function spliceableLength(req: IncomingMessage): number | undefined {
  if (!canSplice() || req.headers["transfer-encoding"] !== undefined || req.readableFlowing || req.readableEnded) return undefined;
  const length = Number(req.headers["content-length"]);
  if (!Number.isSafeInteger(length) || length < SPLICE_MIN_BYTES) return undefined;
  return socketFd(req.socket) === undefined ? undefined : length;
}

/** The body's transfer: `ended` settles when every byte went (or it failed: the next hop was destroyed then). */
export interface SplicedBody {
  ended: Promise<void>;
  /** Stops the transfer (the reply is over, or the caller left); `ended` settles once it stopped. */
  stop(): void;
}

export function spliceBody(req: IncomingMessage, res: ServerResponse, upReq: ClientRequest, length: number): SplicedBody {
  const client = req.socket as Socket & { [BODY_HANDED_OFF]?: true };
  // Node resumes a paused connection once a reply's writes drain (socketOnDrain): kept paused for good,
  // a reply can flow while the body still moves (a server answering as it reads), and Node never reads
  // the socket the kernel reads. The connection closes after this reply anyway.
  Object.defineProperty(client, "_paused", { configurable: true, get: () => true, set: () => {} });
  client.pause();
  client[BODY_HANDED_OFF] = true;
  res.shouldKeepAlive = false; // the parser still waits for the body: no next request on this connection
  const head: Buffer[] = [];
  let taken = 0;
  for (let chunk: Buffer | null; (chunk = req.read() as Buffer | null) !== null;) {
    head.push(chunk);
    taken += chunk.length;
  }
  let transfer: SpliceTransfer | undefined;
  let stopped = false;
  const ended = new Promise<void>((resolve) => {
    const fail = (err: Error) => {
      upReq.destroy(err);
      resolve();
    };
    // The request's head (and the body's first bytes) must be in the kernel before the spliced bytes follow.
    upReq.write(head.length > 0 ? Buffer.concat(head, taken) : "", (err) => {
      if (err) return fail(err);
      const toFd = upReq.socket ? socketFd(upReq.socket as Socket) : undefined;
      const fromFd = socketFd(client);
      if (stopped || toFd === undefined || fromFd === undefined) return fail(new Error("the body's transfer was stopped before it began"));
      try {
        transfer = spliceBytes(fromFd, toFd, length - taken, DEFAULT_LISTEN.bodyIdleTimeoutMs);
      } catch (e) {
        return fail(e as Error);
      }
      transfer.done.then(() => {
        upReq.end();
        resolve();
      }, fail);
    });
  });
  return {
    ended,
    stop: () => {
      stopped = true;
      transfer?.abort();
    },
  };
}
