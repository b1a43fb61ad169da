import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { SANDBOX_APP } from "../../helpers/sandbox-app.js";
import { wsRoundTrip } from "../../helpers/websocket.js";

/**
 * `sandbox.fetch(port)` and preview URLs reach a server running
 * inside the sandbox, through the simulator's proxy and the agent's /port/{n},
 * with the real SDK where a user would call it. (npm run build first: the
 * agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
const WS = "previews";
const KEY = "previews-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;
let sandbox: InstanceType<Sdk["SandboxInstance"]>;
let appPort: number;

interface Echo {
  method: string;
  url: string;
  headers: Record<string, string>;
  bytes: number;
}

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: WS, testHooks: true, logLevel: "silent" });
  sdk = await sdkForSimulator(sim.env);
  sandbox = await sdk.SandboxInstance.create({ name: "web" });
  await sandbox.fs.write("/app/server.js", SANDBOX_APP);
  await sandbox.process.exec({ name: "app", command: "node server.js", workingDir: "/app" });
  for (let tries = 0; !appPort && tries < 400; tries++) {
    appPort = Number(await sandbox.fs.read("/app/port.txt").catch(() => "0"));
    if (!appPort) await new Promise((r) => setTimeout(r, 50));
  }
}, 60_000);
afterAll(async () => {
  await sim?.stop();
});

/** GET with a Host header (Node's resolver does not resolve *.localhost, browsers do). */
function getWithHost(
  host: string,
  path: string,
  headers: Record<string, string> = {},
  method = "GET",
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(sim.url);
  return new Promise((resolve, reject) => {
    request({ host: url.hostname, port: url.port, path, method, headers: { ...headers, host: `${host}:${url.port}` } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d)).on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    })
      .on("error", reject)
      .end();
  });
}

describe("sandbox.fetch(port) through the sandbox URL", () => {
  it("reaches the app inside the sandbox with method, path, query and body; the platform key stays behind", async () => {
    const res = await sandbox.fetch(appPort, "/echo/a?b=1", { method: "POST", body: "12345", headers: { authorization: "Bearer app-own", cookie: "c=1" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-app")).toBe("in-sandbox");
    const echo = (await res.json()) as Echo;
    expect(echo).toMatchObject({ method: "POST", url: "/echo/a?b=1", bytes: 5 });
    expect(echo.headers.authorization).toBe("Bearer app-own");
    expect(echo.headers.cookie).toBe("c=1");
    expect(echo.headers["x-blaxel-authorization"]).toBeUndefined();
    expect(JSON.stringify(echo.headers)).not.toContain(KEY);
  });

  it("502 naming the port when nothing listens there (the SDK's gateway status)", async () => {
    const res = await sandbox.fetch(1, "/");
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: string }).error).toContain("port 1");
  });

  it("takes one hop: the sandbox's launcher opens its ports for the proxy (bwrap: the agent hands the socket over)", async () => {
    const upstream = await sim.agents.upstream({ workspace: WS, sandbox: "web", path: "/" });
    expect(upstream.openPort).toBeTypeOf("function");
    const socket = await upstream.openPort!(appPort);
    const reply = await new Promise<string>((resolve, reject) => {
      let text = "";
      socket
        .setEncoding("utf8")
        .on("data", (d: string) => (text += d))
        .on("end", () => resolve(text))
        .on("error", reject);
      socket.end("GET /echo/raw HTTP/1.0\r\n\r\n");
    });
    expect(reply).toContain('"url":"/echo/raw"');
  });

  it("upgrades a WebSocket through /port/{n}", async () => {
    const ws = await wsRoundTrip(`${sandbox.metadata.url}/port/${appPort}/hmr`, { "x-blaxel-authorization": `Bearer ${KEY}` }, "hot");
    expect(ws.status).toBe(101);
    expect(ws.echo).toBe("echo:hot");
    const denied = await wsRoundTrip(`${sandbox.metadata.url}/port/${appPort}/hmr`, {}, "hot");
    expect(denied.status).toBe(401);
    expect(denied.headers["x-blaxel-error-code"]).toBe("AUTHENTICATION_REQUIRED");
  });

  it("the run-URL form /{workspace}/sandboxes/{name}/port/{n} answers too", async () => {
    const res = await fetch(`${sim.url}/${WS}/sandboxes/web/port/${appPort}/x`, { headers: { "x-blaxel-authorization": `Bearer ${KEY}` } });
    expect(((await res.json()) as Echo).url).toBe("/x");
  });
});

describe("previews", () => {
  it("a public preview answers at its spec.url without credentials, and at its host name", async () => {
    const preview = await sandbox.previews.create({
      metadata: { name: "site" },
      spec: { port: appPort, public: true, responseHeaders: { "X-Frame-Options": "DENY" } },
    });
    expect(preview.spec.url).toBe(`${sim.url}/${WS}/sandboxes/web/previews/site`);
    const res = await fetch(`${preview.spec.url}/index.html?q=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(((await res.json()) as Echo).url).toBe("/index.html?q=1");
    const byHost = await getWithHost(`site-web-${WS}.preview.localhost`, "/from-host");
    expect(byHost.status).toBe(200);
    expect((JSON.parse(byHost.body) as Echo).url).toBe("/from-host");
  });

  it("prefixUrl names the host ({prefix}-{workspace}.preview.localhost) and is in the default spec.url, unique in the workspace", async () => {
    const preview = await sandbox.previews.create({ metadata: { name: "pref" }, spec: { port: appPort, public: true, prefixUrl: "myapp" } });
    // The SDK's preview test: `expect(preview.spec.url).toContain("my-custom-prefix")`; the URL works as it is.
    expect(preview.spec.url).toBe(`${sim.url}/${WS}/previews/myapp`);
    const byUrl = await fetch(`${preview.spec.url}/p?q=1`);
    expect(byUrl.status).toBe(200);
    expect((await byUrl.json()) as Echo).toMatchObject({ url: "/p?q=1" });
    expect((await fetch(`${sim.url}/${WS}/previews/nobody`)).status).toBe(404);
    const res = await getWithHost(`myapp-${WS}.preview.localhost`, "/p");
    expect((JSON.parse(res.body) as Echo).url).toBe("/p");
    await expect(sandbox.previews.create({ metadata: { name: "pref2" }, spec: { port: appPort, public: true, prefixUrl: "myapp" } })).rejects.toMatchObject({
      code: 409,
    });
  });

  it("a private preview needs a live token: header, query parameter (then a cookie), 401 otherwise", async () => {
    const preview = await sandbox.previews.create({ metadata: { name: "private" }, spec: { port: appPort, public: false } });
    const url = preview.spec.url!;
    const none = await fetch(`${url}/x`);
    expect(none.status).toBe(401);
    expect(none.headers.get("x-blaxel-error-code")).toBe("AUTHENTICATION_REQUIRED");
    const token = await preview.tokens.create(new Date(sim.deps.clock.now() + 3_600_000));
    const wrong = await fetch(`${url}/x`, { headers: { "x-blaxel-preview-token": "nope" } });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe("AUTHENTICATION_FAILED");

    const byHeader = await fetch(`${url}/x`, { headers: { "x-blaxel-preview-token": token.value } });
    expect(byHeader.status).toBe(200);
    expect(((await byHeader.json()) as Echo).headers["x-blaxel-preview-token"]).toBeUndefined();

    const byQuery = await fetch(`${url}/x?a=1&bl_preview_token=${token.value}`);
    expect(byQuery.status).toBe(200);
    expect(((await byQuery.json()) as Echo).url).toBe("/x?a=1"); // the token is the simulator's, not the app's
    const cookie = byQuery.headers.get("set-cookie")!;
    expect(cookie).toContain(`bl_preview_token=${token.value}`);
    expect(cookie).toContain(`Path=/${WS}/sandboxes/web/previews/private`);
    const byCookie = await fetch(`${url}/asset.js`, { headers: { cookie: `theme=dark; ${cookie.split(";")[0]}` } });
    expect(byCookie.status).toBe(200);
    expect(((await byCookie.json()) as Echo).headers.cookie).toBe("theme=dark");
  });

  it("tokens: own ids (15 in one millisecond), delete by value, expiry on the simulator clock", async () => {
    const preview = await sandbox.previews.get("private");
    const expires = new Date(sim.deps.clock.now() + 60_000);
    const realNow = Date.now;
    Date.now = () => 1_700_000_000_000; // the SDK names every token "token-" + Date.now()
    let tokens;
    try {
      tokens = await Promise.all(Array.from({ length: 15 }, () => preview.tokens.create(expires)));
    } finally {
      Date.now = realNow;
    }
    const ids = (await preview.tokens.list())
      .filter((t) => tokens.some((n) => n.value === t.value))
      .map((t) => (t as unknown as { previewToken: { metadata: { name: string } } }).previewToken.metadata.name);
    expect(new Set(ids).size).toBe(15);
    expect(new Set(tokens.map((t) => t.value)).size).toBe(15);

    const [first, second] = tokens as [(typeof tokens)[0], (typeof tokens)[0]];
    const url = `${preview.spec.url}/x`;
    expect((await fetch(url, { headers: { "x-blaxel-preview-token": first.value } })).status).toBe(200);
    await preview.tokens.delete(first.value);
    expect((await fetch(url, { headers: { "x-blaxel-preview-token": first.value } })).status).toBe(401);
    expect((await preview.tokens.list()).some((t) => t.value === first.value)).toBe(false);

    await fetch(`${sim.url}/_sim/clock`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ freeze: true }) });
    await fetch(`${sim.url}/_sim/clock`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ advanceMs: 61_000 }) });
    const late = await fetch(url, { headers: { "x-blaxel-preview-token": second.value } });
    expect(late.status).toBe(401);
    expect((await preview.tokens.list()).find((t) => t.value === second.value)?.expired).toBe(true);
    await fetch(`${sim.url}/_sim/clock`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ freeze: false }) });
  });

  it("CORS: a preflight is answered from the preview's responseHeaders, without a token", async () => {
    const cors = {
      "Access-Control-Allow-Origin": "https://app.example",
      "Access-Control-Allow-Headers": "X-Blaxel-Preview-Token",
      "Access-Control-Allow-Methods": "GET, POST",
    };
    const preview = await sandbox.previews.create({ metadata: { name: "cors" }, spec: { port: appPort, public: false, responseHeaders: cors } });
    const res = await fetch(`${preview.spec.url}/api`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST", "access-control-request-headers": "x-blaxel-preview-token" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(res.headers.get("access-control-allow-headers")).toBe("X-Blaxel-Preview-Token");
  });

  it("a session (port 443) is the sandbox API behind a preview token: SandboxInstance.fromSession works", async () => {
    const session = await sandbox.sessions.create({ expiresAt: new Date(sim.deps.clock.now() + 3_600_000) });
    const remote = await sdk.SandboxInstance.fromSession(session);
    await remote.fs.write("/from-session.txt", "via the session");
    expect(await sandbox.fs.read("/from-session.txt")).toBe("via the session");
    const denied = await fetch(`${session.url}/filesystem/`);
    expect(denied.status).toBe(401);
  });

  it("requestHeaders reach the app; WebSocket upgrades pass through a preview", async () => {
    const preview = await sandbox.previews.create({
      metadata: { name: "hmr" },
      spec: { port: appPort, public: true, requestHeaders: { "X-From-Preview": "yes" } },
    });
    const echo = (await (await fetch(`${preview.spec.url}/h`)).json()) as Echo;
    expect(echo.headers["x-from-preview"]).toBe("yes");
    const ws = await wsRoundTrip(`${preview.spec.url}/_hmr`, {}, "reload");
    expect(ws.status).toBe(101);
    expect(ws.echo).toBe("echo:reload");
  });

  it("404 ROUTE_NOT_FOUND for an unknown preview, by path and by host", async () => {
    const res = await fetch(`${sim.url}/${WS}/sandboxes/web/previews/nope/`);
    expect(res.status).toBe(404);
    expect(res.headers.get("x-blaxel-error-code")).toBe("ROUTE_NOT_FOUND");
    const byHost = await getWithHost(`nope-web-${WS}.preview.localhost`, "/");
    expect(byHost.status).toBe(404);
  });
});
