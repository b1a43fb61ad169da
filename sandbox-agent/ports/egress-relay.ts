import { connect, createServer, type Server } from "node:net";
import type { Logger } from "../../src/logging.js";

/**
 * The egress gateway of a container launcher (`--egress-relay`), which has
 * no IPC channel to hand a listener over (ports/gateway.ts): the agent
 * listens on the simulator's address inside the sandbox (127.0.0.1 and ::1
 * on the simulator's port, so the URLs users get work from inside) and
 * relays each connection to the simulator's egress listener for this
 * sandbox, which it reaches on the sandbox's own network (the docker
 * launcher's per-sandbox internal network, docs/launchers.md). The simulator
 * knows the sandbox by that listener and checks the connection's source.
 */
export function serveEgressRelay(relay: { port: number; host: string; targetPort: number }, logger?: Logger): Server[] {
  const servers: Server[] = [];
  for (const host of ["127.0.0.1", "::1"]) {
    const server = createServer((client) => {
      client.setNoDelay(true);
      const upstream = connect({ host: relay.host, port: relay.targetPort, noDelay: true });
      const closeBoth = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", closeBoth).on("close", () => upstream.destroy());
      upstream.on("error", closeBoth).on("close", () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    server.once("error", (err: NodeJS.ErrnoException) => {
      // A container without IPv6 has no ::1: the IPv4 address is enough there.
      if (host === "::1" && (err.code === "EADDRNOTAVAIL" || err.code === "EAFNOSUPPORT")) return;
      logger?.warn({ host, port: relay.port, err: err.code }, "egress relay: cannot listen");
    });
    server.listen({ host, port: relay.port, exclusive: true });
    servers.push(server);
  }
  return servers;
}
