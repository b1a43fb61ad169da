import { createServer, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectOnHost } from "../../../simulator/launcher/port-handoff.js";
import { rssGrowthDuring, writeMiB } from "../../helpers/memory.js";
import { startAppServer, wsRoundTrip, type AppServer, type Echo } from "../../helpers/websocket.js";
import { startProxy, type ProxyHarness } from "./harness.js";

/**
 * /port/{n} in one hop: the upstream can open the port (Upstream.openPort),
 * so the proxy speaks HTTP to the app itself. The agent's URL here answers
 * nothing at all: every reply proves the agent was not on the way. What the
 * agent's /port/{n} does (test/sandbox-agent/ports) holds the same: the
 * agent's token never reaches the app, 502 `{error}` when nothing listens,
 * upgrades, bodies streamed with flat memory; a sandbox that cannot be asked is a 503.
 */
const MiB = 1024 * 1024;
const AGENT_TOKEN = "agent-token-direct";
const asWs = { authorization: "Bearer key-of-ws" };
let harness: ProxyHarness;
let app: AppServer;

beforeAll(async () => {
  harness = await startProxy();
  app = await startAppServer();
  const nowhere = "http://127.0.0.1:1"; // no agent: a request through it would be a 503
  harness.sandboxes.set("box", { url: nowhere, token: AGENT_TOKEN, openPort: connectOnHost });
  harness.sandboxes.set("gone", { url: nowhere, token: AGENT_TOKEN, openPort: () => Promise.reject(new Error("the agent's channel is closed")) });
});
afterAll(async () => {
  await app?.close();
  await harness?.close();
});

function put(path: string, mib: number): Promise<{ status: number; echo: Echo }> {
  return new Promise((resolve, reject) => {
    const req = request(`${harness.url}${path}`, { method: "PUT", headers: { ...asWs, "content-length": mib * MiB } }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d)).on("end", () => resolve({ status: res.statusCode!, echo: JSON.parse(text) as Echo }));
    });
    req.on("error", reject);
    writeMiB(req, mib);
  });
}

describe("/port/{n} straight to the app over an opened connection", () => {
  it("reaches the app with path, query and the caller's headers; neither the caller's key nor the agent's token", async () => {
    const res = await fetch(`${harness.url}/sbx/ws/box/port/${app.port}/echo/a?b=1`, {
      method: "POST",
      body: "12345",
      headers: { ...asWs, cookie: "c=1", "x-app": "mine" },
    });
    expect(res.status).toBe(200);
    const echo = (await res.json()) as Echo;
    expect(echo).toMatchObject({ method: "POST", url: "/echo/a?b=1", bytes: 5 });
    expect(echo.headers.cookie).toBe("c=1");
    expect(echo.headers["x-app"]).toBe("mine");
    expect(echo.headers["x-forwarded-proto"]).toBe("http");
    expect(echo.headers.authorization).toBeUndefined();
    expect(JSON.stringify(echo.headers)).not.toContain(AGENT_TOKEN);
  });

  it("502 with the agent's {error} naming the port when nothing listens there", async () => {
    const res = await fetch(`${harness.url}/sbx/ws/box/port/1/`, { headers: asWs });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: string }).error).toContain("nothing is listening on port 1");
  });

  it("503 WORKLOAD_UNAVAILABLE when the sandbox cannot be asked for the port", async () => {
    const res = await fetch(`${harness.url}/sbx/ws/gone/port/${app.port}/echo`, { headers: asWs });
    expect(res.status).toBe(503);
    expect(res.headers.get("x-blaxel-error-code")).toBe("WORKLOAD_UNAVAILABLE");
  });

  it("the sandbox API itself still goes to the agent (503 here: there is none)", async () => {
    const res = await fetch(`${harness.url}/sbx/ws/box/filesystem/`, { headers: asWs });
    expect(res.status).toBe(503);
  });

  it("upgrades a WebSocket; a refused one gets the agent's 502", async () => {
    const ws = await wsRoundTrip(`${harness.url}/sbx/ws/box/port/${app.port}/hmr`, asWs, "hot");
    expect(ws.status).toBe(101);
    expect(ws.echo).toBe("echo:hot");
    const refused = await wsRoundTrip(`${harness.url}/sbx/ws/box/port/1/hmr`, asWs, "hot");
    expect(refused.status).toBe(502);
    expect(JSON.parse(refused.body!).error).toContain("port 1");
  });

  it("a reply whose body is held back reaches the caller with its head first (streamed logs, server-sent events)", async () => {
    let held: ServerResponse | undefined;
    const slow = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "x-app": "head" }).flushHeaders();
      held = res;
    });
    await new Promise<void>((r) => slow.listen(0, "127.0.0.1", r));
    try {
      const port = (slow.address() as AddressInfo).port;
      const body = await new Promise<string>((resolve, reject) => {
        request(`${harness.url}/sbx/ws/box/port/${port}/events`, { headers: asWs }, (res) => {
          // The head is here while the app still holds its body: only now does the app send it.
          expect(res.statusCode).toBe(200);
          expect(res.headers["x-app"]).toBe("head");
          let text = "";
          res.on("data", (d) => (text += d)).on("end", () => resolve(text));
          held!.end("data: after the head\n\n");
        })
          .on("error", reject)
          .end();
      });
      expect(body).toBe("data: after the head\n\n");
    } finally {
      slow.closeAllConnections();
      await new Promise<void>((r) => slow.close(() => r()));
    }
  });

  it("streams a 200 MiB upload with flat memory", async () => {
    expect((await put(`/sbx/ws/box/port/${app.port}/upload`, 16)).echo.bytes).toBe(16 * MiB); // warm-up
    let bytes = 0;
    const growth = await rssGrowthDuring(async () => {
      const { status, echo } = await put(`/sbx/ws/box/port/${app.port}/upload`, 200);
      expect(status).toBe(200);
      bytes = echo.bytes;
    });
    expect(bytes).toBe(200 * MiB);
    expect(growth).toBeLessThan(64);
  });
});
