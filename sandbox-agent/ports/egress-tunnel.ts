import { createServer, type Server, type Socket } from "node:net";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { bearerToken, secretsEqual } from "../../src/auth.js";
import type { Logger } from "../../src/logging.js";
import { EGRESS_TUNNEL_PATH, EGRESS_TUNNEL_PROTOCOL, TUNNEL_PAIRED } from "../../src/egress-tunnel.js";

/**
 * The egress gateway of a launcher that can reach the agent but whose sandbox cannot reach the simulator (a
 * swarm task on any node: `--egress-tunnel`). The agent listens on the simulator's address inside the sandbox
 * (127.0.0.1 and ::1 on the simulator's port, so the URLs users get work from inside), and the simulator keeps
 * a few idle tunnels open to the agent (`GET /egress-tunnel` with the agent's token, upgraded). Each connection
 * a sandbox's program opens there is paired with one idle tunnel: the agent writes one byte (`+`, so the
 * simulator knows to open a replacement) and then relays both ways; the simulator hands the tunnel to its
 * egress proxy tagged with this sandbox. The sandbox needs no route out for it, so its direct outbound path
 * can be cut entirely while its policy restricts destinations.
 */

/** How long a sandbox's connection waits for a tunnel before it is closed. */
const WAIT_FOR_TUNNEL_MS = 30_000;

export interface EgressTunnels {
  /** Takes an upgrade request for the tunnel path (true), else leaves it to the app (false). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  close(): void;
}

export function serveEgressTunnel(port: number, token: string | undefined, logger?: Logger): EgressTunnels {
  const idle: Duplex[] = [];
  const waiting: Socket[] = [];

  const pair = () => {
    while (idle.length > 0 && waiting.length > 0) {
      const tunnel = idle.shift()!;
      const client = waiting.shift()!;
      if (client.destroyed) {
        idle.unshift(tunnel);
        continue;
      }
      client.emit("paired");
      tunnel.write(TUNNEL_PAIRED);
      const closeBoth = () => {
        client.destroy();
        tunnel.destroy();
      };
      client.on("error", closeBoth).on("close", () => tunnel.destroy());
      tunnel.on("error", closeBoth).on("close", () => client.destroy());
      client.pipe(tunnel).pipe(client);
      client.resume();
    }
  };

  const servers: Server[] = [];
  let closed = false;
  for (const host of ["127.0.0.1", "::1"]) {
    const server = createServer({ pauseOnConnect: true }, (client) => {
      client.setNoDelay(true);
      const timer = setTimeout(() => client.destroy(), WAIT_FOR_TUNNEL_MS);
      client.once("paired", () => clearTimeout(timer));
      client.once("close", () => {
        clearTimeout(timer);
        const at = waiting.indexOf(client);
        if (at >= 0) waiting.splice(at, 1);
      });
      client.on("error", () => client.destroy());
      waiting.push(client);
      pair();
    });
    let tries = 0;
    server.on("error", (err: NodeJS.ErrnoException) => {
      // A container without IPv6 has no ::1: the IPv4 address is enough there.
      if (host === "::1" && (err.code === "EADDRNOTAVAIL" || err.code === "EAFNOSUPPORT")) return;
      // After an upgrade the agent this one replaces may still be closing its listener.
      if (err.code === "EADDRINUSE" && tries++ < 50) return void setTimeout(() => !closed && server.listen({ host, port, exclusive: true }), 100);
      logger?.warn({ host, port, err: err.code }, "egress tunnel: cannot listen");
    });
    server.listen({ host, port, exclusive: true });
    servers.push(server);
  }

  return {
    upgrade(req, socket, head) {
      if (new URL(req.url ?? "/", "http://agent").pathname !== EGRESS_TUNNEL_PATH) return false;
      const given = bearerToken(req.headers);
      const protocol = String(req.headers.upgrade ?? "").toLowerCase();
      if (!token || !given || !secretsEqual(given, token) || protocol !== EGRESS_TUNNEL_PROTOCOL) {
        const status = protocol !== EGRESS_TUNNEL_PROTOCOL ? "400 Bad Request" : "401 Unauthorized";
        socket.end(`HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"error":"egress tunnel refused"}`);
        return true;
      }
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${EGRESS_TUNNEL_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`);
      if (head.length > 0) socket.unshift(head);
      (socket as Socket).setKeepAlive?.(true, 30_000);
      (socket as Socket).setNoDelay?.(true);
      const drop = () => {
        const at = idle.indexOf(socket);
        if (at >= 0) idle.splice(at, 1);
      };
      socket.once("close", drop).on("error", () => socket.destroy());
      idle.push(socket);
      pair();
      return true;
    },
    close() {
      closed = true;
      servers.forEach((s) => s.close());
      for (const s of [...idle, ...waiting]) s.destroy();
      idle.length = 0;
      waiting.length = 0;
    },
  };
}
