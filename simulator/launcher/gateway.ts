import type { ChildProcess } from "node:child_process";
import { Server, type Socket } from "node:net";
import { GATEWAY_FAILED, OPEN_GATEWAY, OpenGatewayReply, type OpenGatewayRequest } from "../../src/egress-gateway.js";

/**
 * A sandbox cannot be launched here (a tool missing, isolation impossible). Declared in this, the lowest module
 * of the launcher that throws it (types.ts, which every launcher reads, re-exports it and already depends on
 * this file for the egress spec), so the two never import each other.
 */
export class LaunchError extends Error {}

/**
 * The simulator's side of the egress gateway (src/egress-gateway.ts): asks a
 * started agent for listeners inside its sandbox's network and accepts every
 * connection on them here, handing each to `accept`. The listeners are closed
 * when the sandbox's agent exits (a listening socket would otherwise keep its
 * dead network namespace alive).
 */

const GATEWAY_TIMEOUT_MS = 10_000;

export interface GatewaySpec {
  /** Addresses inside the sandbox that lead to the simulator (the simulator's own host and port, as its URLs name them). */
  listen: { host: "127.0.0.1" | "::1"; port: number }[];
  /** Each connection a sandbox's program opens to one of them. */
  accept(socket: Socket): void;
}

export async function openGateways(child: ChildProcess, spec: GatewaySpec): Promise<void> {
  const servers: Server[] = [];
  child.once("exit", () => servers.forEach((s) => s.close()));
  // Every address at once: each is an IPC round trip to the agent, and a create answers only once all are open.
  await Promise.all(
    spec.listen.map(async (address) => {
      const server = await openGateway(child, address.host, address.port);
      servers.push(server);
      if (child.exitCode !== null || child.signalCode !== null) server.close();
      server.on("connection", (socket: Socket) => spec.accept(socket));
      server.on("error", () => server.close());
    }),
  );
}

let nextId = 0;

function openGateway(child: ChildProcess, host: OpenGatewayRequest["host"], port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    if (!child.connected) return reject(new LaunchError("the agent's channel is closed: no egress gateway"));
    const id = nextId++;
    const done = () => {
      clearTimeout(timer);
      child.off("message", onMessage);
    };
    const timer = setTimeout(() => {
      done();
      reject(new LaunchError(`the agent did not open the egress gateway on ${host}:${port} within ${GATEWAY_TIMEOUT_MS} ms`));
    }, GATEWAY_TIMEOUT_MS);
    const onMessage = (message: unknown, handle: unknown) => {
      const reply = OpenGatewayReply.safeParse(message);
      if (!reply.success || reply.data.id !== id) return;
      done();
      if (reply.data.type === GATEWAY_FAILED) return reject(new LaunchError(reply.data.message));
      if (handle instanceof Server) return resolve(handle);
      reject(new LaunchError("the agent answered the egress gateway request without a listener"));
    };
    child.on("message", onMessage);
    const request: OpenGatewayRequest = { type: OPEN_GATEWAY, id, host, port };
    child.send(request, (err) => {
      if (err) {
        done();
        reject(new LaunchError(`cannot ask the agent for the egress gateway: ${err.message}`));
      }
    });
  });
}

/** What a launcher that gives a sandbox its own network needs of the simulator's egress (LaunchSpec.egress). */
export interface SandboxEgressSpec extends GatewaySpec {
  /** The egress proxy's CA certificate (PEM): every TLS client in the sandbox must trust it. */
  caPem: string;
  /** False: the sandbox starts without its direct outbound path (its policy restricts destinations). Default true. */
  direct?: boolean;
  /**
   * Host names that must lead to the simulator inside the sandbox (its --public-url's host, host-form preview
   * names, which NO_PROXY's `localhost` sends straight there): 127.0.0.1 in its /etc/hosts, as of the launch.
   */
  hosts?: string[];
  /** Calls `write` with the new list whenever those names change (a preview created); returns the unsubscribe. */
  watchHosts?(write: (names: string[]) => void): () => void;
}
