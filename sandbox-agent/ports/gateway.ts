import { createServer, type Server } from "node:net";
import type { Logger } from "../../src/logging.js";
import { GATEWAY_FAILED, GATEWAY_OPENED, OpenGatewayRequest, type OpenGatewayReply } from "../../src/egress-gateway.js";

/**
 * The agent's side of the egress gateway (src/egress-gateway.ts): binds the
 * address the launcher asks for inside the sandbox's network namespace and
 * sends the listening socket over the IPC channel. The agent never accepts
 * on it: its own copy is closed once sent, so every connection is the
 * simulator's. Only on a channel `--port-handoff` enabled.
 */
export function serveEgressGateway(channel: NodeJS.Process, logger?: Logger): void {
  if (!channel.send) return;
  const reply = (message: OpenGatewayReply, server?: Server) => {
    if (!channel.connected) return void server?.close();
    channel.send!(message, server, undefined, () => server?.close());
  };
  channel.on("message", (message: unknown) => {
    const asked = OpenGatewayRequest.safeParse(message);
    if (!asked.success) return;
    const { id, host, port } = asked.data;
    const server = createServer({ pauseOnConnect: true });
    server.once("error", (err: NodeJS.ErrnoException) => {
      logger?.warn({ host, port, err: err.code }, "egress gateway: cannot listen");
      reply({ type: GATEWAY_FAILED, id, message: `cannot listen on ${host}:${port} inside the sandbox: ${err.code ?? err.message}` });
    });
    server.listen({ host, port, exclusive: true }, () => reply({ type: GATEWAY_OPENED, id }, server));
  });
}
