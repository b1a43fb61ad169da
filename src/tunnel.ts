import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

/**
 * Joins two sockets both ways, as raw bytes (an upgraded connection: a
 * WebSocket, a dev server's hot-reload channel). Node's pipe keeps
 * backpressure in each direction, so a slow side pauses the other; either
 * side ending or failing closes both.
 */
export function spliceSockets(a: Duplex, b: Duplex): void {
  const closeBoth = () => {
    a.destroy();
    b.destroy();
  };
  a.on("error", closeBoth);
  b.on("error", closeBoth);
  a.on("close", () => b.destroy());
  b.on("close", () => a.destroy());
  a.pipe(b);
  b.pipe(a);
}

/**
 * Answers a connection that asked for an upgrade with a plain HTTP reply and
 * closes it: the `upgrade` event hands over the raw socket, with no
 * ServerResponse to write to.
 */
export function rawReply(socket: Duplex, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (socket.destroyed) return;
  const text = JSON.stringify(body);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(text)}`,
    "Cache-Control: no-store",
    "Connection: close",
  ];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  socket.end(`${lines.join("\r\n")}\r\n\r\n${text}`);
}
