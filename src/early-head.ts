import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * Streamed replies (process logs, server-sent events) must reach the caller
 * before their first byte: the simulator's proxy and the agent's port
 * forwarding both relay them. A reply whose body came with its head (most small ones: the parser
 * has pushed it by the time `response` is handled) needs no early flush: its
 * head then leaves in the same write as the body, one packet and one wake-up
 * of the caller instead of two (sequential small requests through the
 * egress proxy spent ~80 us of the simulator's time per request on the
 * separate write). The check runs after the pipe's first turn.
 */
export function flushUnlessBodyFollows(upRes: IncomingMessage, res: ServerResponse): void {
  let started = false;
  const start = () => (started = true);
  upRes.once("data", start).once("end", start);
  setImmediate(() => {
    upRes.off("data", start).off("end", start);
    if (!started && !res.writableEnded && !res.destroyed) res.flushHeaders();
  });
}
