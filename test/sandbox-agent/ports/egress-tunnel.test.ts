import { createServer as createHttpServer, request, type Server } from "node:http";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { serveEgressTunnel, type EgressTunnels } from "../../../sandbox-agent/ports/egress-tunnel.js";
import { keepEgressTunnels } from "../../../simulator/launcher/swarm-egress.js";
import { EGRESS_TUNNEL_PATH, EGRESS_TUNNEL_PROTOCOL } from "../../../src/egress-tunnel.js";

/**
 * The egress tunnel (--egress-tunnel): the agent listens on the simulator's address inside the sandbox and
 * pairs each connection there with a tunnel the launcher opened to it (an upgrade with the agent's token);
 * the launcher's side (swarm-egress.ts) keeps tunnels open and hands each taken one to the egress proxy.
 */
const TOKEN = "tunnel-token-0123456789";

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  return port;
}

let agent: Server | undefined;
let tunnels: EgressTunnels | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  cleanups.splice(0).forEach((c) => c());
  tunnels?.close();
  await new Promise((r) => (agent ? agent.close(r) : r(undefined)));
  agent = undefined;
});

/** An agent-like server: the tunnel's upgrades, and "app" for anything else. */
async function startAgent(): Promise<{ url: string; localPort: number; upgradesLeftToApp: string[] }> {
  const localPort = await freePort();
  tunnels = serveEgressTunnel(localPort, TOKEN);
  const upgradesLeftToApp: string[] = [];
  agent = createHttpServer((_q, s) => s.end("app"));
  agent.on("upgrade", (req, socket, head) => {
    if (!tunnels!.upgrade(req, socket, head)) {
      upgradesLeftToApp.push(req.url ?? "");
      socket.destroy();
    }
  });
  await new Promise<void>((r) => agent!.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(agent.address() as AddressInfo).port}`, localPort, upgradesLeftToApp };
}

/** What the sandbox's program gets back for `text`, through the tunnel. */
function roundTrip(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(text));
    let got = "";
    socket.on("data", (d) => {
      got += String(d);
      if (got.endsWith("!")) {
        socket.end();
        resolve(got);
      }
    });
    socket.on("error", reject);
  });
}

const echo = (socket: Socket) => socket.on("data", (d) => socket.write(`echo:${String(d)}!`));

function upgrade(url: string, headers: Record<string, string>, path = EGRESS_TUNNEL_PATH): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers: { connection: "Upgrade", ...headers } });
    req.on("response", (res) => resolve(res.statusCode ?? 0));
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", (err) => (path === EGRESS_TUNNEL_PATH ? reject(err) : resolve(0)));
    req.end();
  });
}

describe("the agent's egress tunnel", () => {
  it("refuses a tunnel without the token (401) or of another protocol (400); other upgrades are the app's", async () => {
    const { url, upgradesLeftToApp } = await startAgent();
    expect(await upgrade(url, { upgrade: EGRESS_TUNNEL_PROTOCOL })).toBe(401);
    expect(await upgrade(url, { upgrade: EGRESS_TUNNEL_PROTOCOL, authorization: "Bearer wrong" })).toBe(401);
    expect(await upgrade(url, { upgrade: "websocket", authorization: `Bearer ${TOKEN}` })).toBe(400);
    expect(await upgrade(url, { upgrade: EGRESS_TUNNEL_PROTOCOL, authorization: `Bearer ${TOKEN}` })).toBe(101);
    await upgrade(url, { upgrade: "websocket" }, "/terminal/ws");
    expect(upgradesLeftToApp).toEqual(["/terminal/ws"]);
  });

  it("pairs each sandbox connection with a tunnel, more connections than idle tunnels included, bytes both ways", async () => {
    const { url, localPort } = await startAgent();
    const accepted: Socket[] = [];
    const pool = keepEgressTunnels(url, TOKEN, (socket) => {
      accepted.push(socket);
      echo(socket);
    });
    cleanups.push(() => pool.close());
    const replies = await Promise.all(["a", "b", "c", "d", "e"].map((t) => roundTrip(localPort, t)));
    expect(replies).toEqual(["echo:a!", "echo:b!", "echo:c!", "echo:d!", "echo:e!"]);
    expect(accepted).toHaveLength(5);
  });

  it("a connection made before any tunnel waits for one; a pool opened with a wrong token hands nothing over", async () => {
    const { url, localPort } = await startAgent();
    const early = roundTrip(localPort, "early");
    let wrongAccepted = 0;
    const wrong = keepEgressTunnels(url, "not-the-token", () => wrongAccepted++);
    cleanups.push(() => wrong.close());
    await new Promise((r) => setTimeout(r, 300));
    expect(wrongAccepted).toBe(0);
    const pool = keepEgressTunnels(url, TOKEN, echo);
    cleanups.push(() => pool.close());
    expect(await early).toBe("echo:early!");
  });

  it("once the pool is closed its idle tunnels are gone: a new connection is not served", async () => {
    const { url, localPort } = await startAgent();
    const pool = keepEgressTunnels(url, TOKEN, echo);
    expect(await roundTrip(localPort, "one")).toBe("echo:one!");
    pool.close();
    await new Promise((r) => setTimeout(r, 200));
    let served = false;
    const socket = connect(localPort, "127.0.0.1", () => socket.write("two"));
    socket.on("data", () => (served = true));
    socket.on("error", () => undefined);
    await new Promise((r) => setTimeout(r, 500));
    expect(served).toBe(false);
    socket.destroy();
  });
});
