import { request as httpRequest } from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { startAppServer, wsRoundTrip } from "../../helpers/websocket.js";

/**
 * A web page must not drive an agent started without a token.
 * Raw node:http requests, so Host and Origin are exactly what a browser sends.
 */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string }) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const agents: TestAgent[] = [];
afterAll(() => Promise.all(agents.map((a) => a.stop())));

describe("an agent without a token", () => {
  it("refuses a browser's simple text/plain POST, sends no CORS headers, and runs nothing", async () => {
    const agent = await startTestAgent();
    agents.push(agent);
    const res = await send(`${agent.url}/process`, {
      method: "POST",
      headers: { "Content-Type": "text/plain;charset=UTF-8" },
      body: JSON.stringify({ command: "touch ran", workingDir: "/" }),
    });
    expect(res.status).toBe(415);
    expect(res.headers["access-control-allow-origin"]).toBeUndefined();
    expect(agent.runtime.deps.processes.list()).toEqual([]);
    const preflight = await send(`${agent.url}/process`, {
      method: "OPTIONS",
      headers: { Origin: "http://evil.example", "Access-Control-Request-Method": "POST" },
    });
    expect(preflight.headers["access-control-allow-origin"]).toBeUndefined();
    const health = await send(`${agent.url}/health`, {});
    expect(health.status).toBe(200);
    expect(health.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it("refuses a Host that is not a loopback name (DNS rebinding) and a cross-origin Origin", async () => {
    const agent = await startTestAgent();
    agents.push(agent);
    const rebound = await send(`${agent.url}/filesystem/`, { headers: { Host: `evil.example:${agent.serving.port}` } });
    expect(rebound.status).toBe(403);
    const crossSite = await send(`${agent.url}/process/x/kill`, { method: "POST", headers: { Origin: "http://evil.example" } });
    expect(crossSite.status).toBe(403);
    for (const host of [`localhost:${agent.serving.port}`, `127.0.0.1:${agent.serving.port}`, "sbx.localhost", "[::1]:80"]) {
      expect((await send(`${agent.url}/health`, { headers: { Host: host } })).status, host).toBe(200);
    }
    const json = await send(`${agent.url}/process`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: `http://localhost:${agent.serving.port}` },
      body: JSON.stringify({ command: "true", waitForCompletion: true }),
    });
    expect(json.status).toBe(200);
  });

  it("applies the Host and Origin checks to /port/{n} too, plain requests and upgrades alike", async () => {
    const agent = await startTestAgent();
    agents.push(agent);
    const app = await startAppServer();
    try {
      const port = agent.serving.port;
      const rebound = await send(`${agent.url}/port/${app.port}/echo`, { headers: { Host: `evil.example:${port}` } });
      expect(rebound.status).toBe(403);
      expect(rebound.body).toContain("not a loopback name");
      const crossSite = await send(`${agent.url}/port/${app.port}/echo`, {
        method: "POST",
        headers: { Origin: "http://evil.example", "Content-Type": "text/plain" },
        body: "x",
      });
      expect(crossSite.status).toBe(403);
      const ws = await wsRoundTrip(`${agent.url}/port/${app.port}/hmr`, { Host: `evil.example:${port}` }, "ping");
      expect(ws.status).toBe(403);
      const wsCrossSite = await wsRoundTrip(`${agent.url}/port/${app.port}/hmr`, { Origin: "http://evil.example" }, "ping");
      expect(wsCrossSite.status).toBe(403);
      // Addressed to the loopback, the app's own bodies (of any type) still go through.
      const local = await send(`${agent.url}/port/${app.port}/echo`, { method: "POST", headers: { "Content-Type": "text/plain" }, body: "hello" });
      expect(local.status).toBe(200);
      expect((await wsRoundTrip(`${agent.url}/port/${app.port}/hmr`, {}, "ping")).status).toBe(101);
    } finally {
      await app.close();
    }
  });
});

describe("an agent with a token", () => {
  it("keeps CORS open for the SDK in a browser", async () => {
    const agent = await startTestAgent({ token: "t0k" });
    agents.push(agent);
    const preflight = await send(`${agent.url}/process`, {
      method: "OPTIONS",
      headers: { Origin: "http://app.example", "Access-Control-Request-Method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe("*");
    const unauthorized = await send(`${agent.url}/process`, { method: "POST", headers: { "Content-Type": "text/plain" }, body: "{}" });
    expect(unauthorized.status).toBe(401);
  });
});
