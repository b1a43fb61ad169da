import type { Socket } from "node:net";
import type { Logger } from "../../src/logging.js";
import { OpenPortRequest, PORT_FAILED, PORT_OPENED, type OpenPortReply } from "../../src/port-handoff.js";
import { ConfigError } from "../config-options.js";
import { connectLocal, nobodyListening } from "./target.js";

/**
 * `--port-handoff` (src/port-handoff.ts): answers the launcher's requests
 * for connections to ports inside the sandbox on the agent's IPC channel,
 * sending each connected socket itself. The agent's copy is closed once sent
 * (Node's default for a sent handle), so the connection then belongs to the
 * simulator alone. The channel does not keep the agent alive.
 */
export function servePortHandoff(channel: NodeJS.Process, logger?: Logger): void {
  if (!channel.send) throw new ConfigError("--port-handoff needs the IPC channel of a launcher that started the agent with one");
  const send = (reply: OpenPortReply, socket?: Socket) => {
    if (!channel.connected) return void socket?.destroy();
    channel.send!(reply, socket, undefined, (err: Error | null) => {
      if (err) socket?.destroy();
    });
  };
  channel.on("message", (message: unknown) => {
    const asked = OpenPortRequest.safeParse(message);
    if (!asked.success) return;
    const { id, port } = asked.data;
    connectLocal(port, { unread: true }).then(
      (socket) => send({ type: PORT_OPENED, id }, socket),
      (err: NodeJS.ErrnoException) => {
        logger?.debug({ port, err: err.code }, "port hand-off: nothing listening");
        send({ type: PORT_FAILED, id, code: err.code, message: nobodyListening(port, err) });
      },
    );
  });
  channel.channel?.unref();
}
