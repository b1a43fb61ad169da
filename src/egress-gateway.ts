import { z } from "zod";

/**
 * The egress gateway, on the IPC channel a launcher starts an agent with
 * (`--port-handoff`): the simulator asks the agent for a TCP listener on an
 * address inside the sandbox's network namespace (127.0.0.1:<the simulator's
 * port>), the agent binds it there and sends the listening socket itself back
 * (Node's handle passing, SCM_RIGHTS). The simulator then accepts the
 * sandbox's connections on it directly: the simulator's URLs resolve inside
 * the sandbox to a socket that only ever leads to the simulator's egress
 * proxy, which knows which sandbox each connection came from by the listener
 * it arrived on, while the host's loopback stays out of reach.
 */

export const OPEN_GATEWAY = "sandbox-kit:open-gateway";
export const GATEWAY_OPENED = "sandbox-kit:gateway-opened";
export const GATEWAY_FAILED = "sandbox-kit:gateway-failed";

const requestId = z.number().int().nonnegative();

export const OpenGatewayRequest = z.object({
  type: z.literal(OPEN_GATEWAY),
  id: requestId,
  host: z.enum(["127.0.0.1", "::1"]),
  port: z.number().int().min(1).max(65_535),
});
export type OpenGatewayRequest = z.infer<typeof OpenGatewayRequest>;

export const OpenGatewayReply = z.discriminatedUnion("type", [
  z.object({ type: z.literal(GATEWAY_OPENED), id: requestId }),
  z.object({ type: z.literal(GATEWAY_FAILED), id: requestId, message: z.string().max(2_000) }),
]);
export type OpenGatewayReply = z.infer<typeof OpenGatewayReply>;
