import { z } from "zod";

/**
 * The port hand-off, on the IPC channel a launcher starts an agent with
 * (`--port-handoff`): the simulator asks for a connection to port n inside
 * the sandbox, the agent connects to it there (its network namespace) and
 * sends the connected socket itself back (Node's handle passing, SCM_RIGHTS
 * on the Unix socket pair). The simulator then speaks HTTP straight to the
 * in-sandbox server: one proxy hop for /port/{n} and previews instead of two,
 * while the agent stays the only process inside the sandbox's network.
 * Each side parses what the other sends: the agent runs among the sandbox's
 * processes, so its replies are untrusted input for the simulator.
 */

export const OPEN_PORT = "sandbox-kit:open-port";
export const PORT_OPENED = "sandbox-kit:port-opened";
export const PORT_FAILED = "sandbox-kit:port-failed";

const requestId = z.number().int().nonnegative();

export const OpenPortRequest = z.object({ type: z.literal(OPEN_PORT), id: requestId, port: z.number().int().min(1).max(65_535) });
export type OpenPortRequest = z.infer<typeof OpenPortRequest>;

export const OpenPortReply = z.discriminatedUnion("type", [
  z.object({ type: z.literal(PORT_OPENED), id: requestId }),
  /** Nothing accepted the connection; `message` is what the agent's /port/{n} answers in its 502. */
  z.object({ type: z.literal(PORT_FAILED), id: requestId, code: z.string().max(64).optional(), message: z.string().max(2_000) }),
]);
export type OpenPortReply = z.infer<typeof OpenPortReply>;
