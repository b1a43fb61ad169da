import { createHash } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePortPath } from "../../../sandbox-agent/ports/target.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { writeMiB } from "../../helpers/memory.js";
import { startAppServer, wsRoundTrip, type AppServer, type Echo } from "../../helpers/websocket.js";

const TOKEN = "agent-token-123";
const auth = { authorization: `Bearer ${TOKEN}` };
let agent: TestAgent;
let app: AppServer;
let closedPort: number;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  app = await startAppServer();
  const gone = await startAppServer();
  closedPort = gone.port;
  await gone.close();
});
afterAll(async () => {
  await app?.close();
  await agent?.stop();
});

describe("parsePortPath", () => {
  it("splits the port from the path and query", () => {
    expect(parsePortPath("/port/3000")).toEqual({ port: 3000, path: "/" });
    expect(parsePortPath("/port/3000/")).toEqual({ port: 3000, path: "/" });
    expect(parsePortPath("/port/3000/a/b?x=1&y")).toEqual({ port: 3000, path: "/a/b?x=1&y" });
    expect(parsePortPath("/port/3000?x=1")).toEqual({ port: 3000, path: "/?x=1" });
  });
  it("refuses other paths and ports outside 1-65535", () => {
    for (const url of ["/port/", "/port/abc", "/port/0/x", "/port/65536", "/port/3000x", "/ports/3000", "/filesystem/port/3000"])
      expect(parsePortPath(url)).toBeUndefined();
  });
});

describe("/port/{n} on the agent", () => {
  it("forwards method, path, query, end-to-end headers and body; the agent's credential stays behind", async () => {
    const res = await fetch(`${agent.url}/port/${app.port}/echo/x?a=1&b=2`, {
      method: "PATCH",
      headers: { ...auth, cookie: "session=s1", "x-app-header": "v", "content-type": "text/plain" },
      body: "hello",
    });
    expect(res.status).toBe(200);
    const echo = (await res.json()) as Echo;
    expect(echo).toMatchObject({ method: "PATCH", url: "/echo/x?a=1&b=2", bytes: 5 });
    expect(echo.headers).toMatchObject({ cookie: "session=s1", "x-app-header": "v" });
    expect(echo.headers.authorization).toBeUndefined();
    // the app's own reply headers come back as they were, without the agent's CORS or no-cache ones
    expect(res.headers.get("x-app")).toBe("yes");
    expect(res.headers.getSetCookie()).toEqual(["a=1; Path=/", "b=2; Path=/"]);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("passes the app's own Authorization when the agent's token came in X-Blaxel-Authorization", async () => {
    const res = await fetch(`${agent.url}/port/${app.port}/echo`, {
      headers: { "x-blaxel-authorization": `Bearer ${TOKEN}`, authorization: "Bearer for-the-app" },
    });
    const echo = (await res.json()) as Echo;
    expect(echo.headers.authorization).toBe("Bearer for-the-app");
    expect(echo.headers["x-blaxel-authorization"]).toBeUndefined();
  });

  it("keeps the app's status codes", async () => {
    const res = await fetch(`${agent.url}/port/${app.port}/created`, { method: "POST", headers: auth, body: "x" });
    expect(res.status).toBe(201);
  });

  it("401 without the agent's token, like every route", async () => {
    const none = await fetch(`${agent.url}/port/${app.port}/echo`);
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: expect.stringContaining("token") });
    const wrong = await fetch(`${agent.url}/port/${app.port}/echo`, { headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
  });

  it("502 {error} naming the port when nothing listens there", async () => {
    const res = await fetch(`${agent.url}/port/${closedPort}/x`, { headers: auth });
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ error: expect.stringContaining(`port ${closedPort}`) });
  });

  it("streams a large upload through and hands back the same bytes' hash", async () => {
    const chunk = Buffer.alloc(1024 * 1024, 3);
    const total = 32;
    const expected = createHash("sha256");
    for (let i = 0; i < total; i++) expected.update(chunk);
    const echo = await new Promise<Echo>((resolve, reject) => {
      const req = request(`${agent.url}/port/${app.port}/upload`, { method: "PUT", headers: auth }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d)).on("end", () => resolve(JSON.parse(text) as Echo));
      });
      req.on("error", reject);
      writeMiB(req, total, 3);
    });
    expect(echo.bytes).toBe(total * 1024 * 1024);
    expect(echo.sha256).toBe(expected.digest("hex"));
  });

  it("streams a reply: the first chunk arrives while the app is still writing", async () => {
    const res = await fetch(`${agent.url}/port/${app.port}/stream`, { headers: auth });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toBe("first\n");
    app.release();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += Buffer.from(r.value).toString();
    expect(rest).toBe("last\n");
  });

  it("upgrades to a WebSocket: 101 from the app, then frames both ways", async () => {
    const ws = await wsRoundTrip(`${agent.url}/port/${app.port}/hmr?x=1`, auth, "ping");
    expect(ws.status).toBe(101);
    expect(ws.headers["x-upgrade-path"]).toBe("/hmr?x=1");
    expect(ws.echo).toBe("echo:ping");
  });

  it("refuses an upgrade without the token (401) and when nothing listens (502)", async () => {
    const denied = await wsRoundTrip(`${agent.url}/port/${app.port}/hmr`, {}, "ping");
    expect(denied.status).toBe(401);
    const nobody = await wsRoundTrip(`${agent.url}/port/${closedPort}/hmr`, auth, "ping");
    expect(nobody.status).toBe(502);
    expect(JSON.parse(nobody.body!)).toEqual({ error: expect.stringContaining(`port ${closedPort}`) });
    const elsewhere = await wsRoundTrip(`${agent.url}/process`, auth, "ping");
    expect(elsewhere.status).toBe(404);
  });

  it("reaches a server listening on ::1 only (a dev server bound to localhost)", async (ctx) => {
    let v6: AppServer;
    try {
      v6 = await startAppServer("::1");
    } catch {
      return ctx.skip(); // no IPv6 loopback on this host
    }
    try {
      const res = await fetch(`${agent.url}/port/${v6.port}/echo`, { headers: auth });
      expect(res.status).toBe(200);
    } finally {
      await v6.close();
    }
  });
});
