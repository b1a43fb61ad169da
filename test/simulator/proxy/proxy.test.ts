import { createServer, request, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessLauncher, type AgentHandle } from "../../../simulator/launcher/index.js";
import { specFor, tempBase } from "../launcher/helpers.js";
import { startProxy, type ProxyHarness } from "./harness.js";

const base = tempBase("proxy-");
let harness: ProxyHarness;
let agent: AgentHandle;
const spec = specFor(base, "box");

beforeAll(async () => {
  harness = await startProxy();
  agent = await new ProcessLauncher().start(spec);
  harness.sandboxes.set("box", { url: agent.url, token: spec.token });
});
afterAll(async () => {
  await agent?.stop(1_000);
  await harness?.close();
  rmSync(base, { recursive: true, force: true });
});

const asWs = { authorization: "Bearer key-of-ws" };

describe("sandbox proxy over a real agent", () => {
  it("swaps the caller's credential for the sandbox token: write and read back through /sbx/", async () => {
    const put = await fetch(`${harness.url}/sbx/ws/box/filesystem/notes/a.txt`, {
      method: "PUT",
      headers: { ...asWs, "content-type": "application/json" },
      body: JSON.stringify({ content: "through the proxy" }),
    });
    expect(put.status).toBe(200);
    const get = await fetch(`${harness.url}/sbx/ws/box/filesystem/notes/a.txt`, { headers: asWs });
    expect(((await get.json()) as { content: string }).content).toBe("through the proxy");
  });

  it("routes by host name sbx-{sandbox}-{workspaceId}.{region}.localhost", async () => {
    const body = await new Promise<string>((resolve, reject) => {
      request(
        {
          host: "127.0.0.1",
          port: harness.port,
          path: "/filesystem/notes/a.txt",
          headers: { ...asWs, host: `sbx-box-ws-id-1.local.localhost:${harness.port}` },
        },
        (res) => {
          let text = "";
          res.on("data", (d) => (text += d)).on("end", () => resolve(text));
        },
      )
        .on("error", reject)
        .end();
    });
    expect(JSON.parse(body).content).toBe("through the proxy");
  });

  it("401 without a credential, 403 with another workspace's, in the edge gateway's shape", async () => {
    const none = await fetch(`${harness.url}/sbx/ws/box/filesystem/notes/a.txt`);
    expect(none.status).toBe(401);
    expect(none.headers.get("x-blaxel-error-code")).toBe("AUTHENTICATION_REQUIRED");
    expect(await none.json()).toEqual({
      error: {
        code: "AUTHENTICATION_REQUIRED",
        message: expect.any(String),
        status: 401,
        retryable: false,
        action: expect.any(String),
        do_not: expect.any(String),
        docs_url: expect.any(String),
        origin: "sandbox-sim",
        timestamp: expect.any(String),
      },
    });
    const bad = await fetch(`${harness.url}/sbx/ws/box/filesystem/notes/a.txt`, { headers: { authorization: "Bearer wrong-key" } });
    expect(bad.status).toBe(401);
    expect(await bad.json()).toMatchObject({ error: { code: "AUTHENTICATION_FAILED" } });
    const other = await fetch(`${harness.url}/sbx/ws/box/filesystem/notes/a.txt`, { headers: { authorization: "Bearer key-of-other" } });
    expect(other.status).toBe(403);
    expect(await other.json()).toMatchObject({ error: { code: "FORBIDDEN", status: 403, message: expect.stringContaining('"ws"') } });
  });

  it("404 for a sandbox that does not exist", async () => {
    const res = await fetch(`${harness.url}/sbx/ws/nope/filesystem/`, { headers: asWs });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: "ROUTE_NOT_FOUND", status: 404, message: expect.stringContaining('"nope"') } });
  });

  it("503 naming the sandbox when its agent is down", async () => {
    const gone = await new ProcessLauncher().start(specFor(base, "gone"));
    harness.sandboxes.set("gone", { url: gone.url, token: "t" });
    await gone.stop(1_000);
    const res = await fetch(`${harness.url}/sbx/ws/gone/filesystem/`, { headers: asWs });
    expect(res.status).toBe(503);
    expect(res.headers.get("x-blaxel-error-code")).toBe("WORKLOAD_UNAVAILABLE");
    expect(await res.json()).toMatchObject({
      error: { code: "WORKLOAD_UNAVAILABLE", status: 503, retryable: true, message: expect.stringContaining('sandbox "gone"') },
    });
  });

  it("passes the agent's own errors through unchanged", async () => {
    const res = await fetch(`${harness.url}/sbx/ws/box/filesystem/missing.txt`, { headers: asWs });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: expect.stringContaining("missing.txt") });
  });
});

describe("sandbox proxy header and abort handling", () => {
  // A recording upstream: the only way to observe exactly what the proxy sends and when it gives up.
  let seen: { headers: IncomingHttpHeaders; closedEarly: boolean; received: number }[] = [];
  let upstreamUrl = "";
  const upstream = createServer((req, res) => {
    const record = { headers: req.headers, closedEarly: false, received: 0 };
    seen.push(record);
    req.on("data", (d: Buffer) => (record.received += d.length));
    req.on("close", () => {
      if (!req.complete) record.closedEarly = true;
    });
    if (req.url === "/slow-upload") return; // never answers: the client gives up first
    req.on("end", () => res.writeHead(200, { "content-type": "application/json", connection: "x-hop-only", "x-hop-only": "1", "x-agent": "yes" }).end("{}"));
  });
  beforeAll(async () => {
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    harness.sandboxes.set("rec", { url: upstreamUrl, token: "sandbox-token" });
  });
  afterAll(() => {
    upstream.closeAllConnections();
    upstream.close();
  });

  it("drops hop-by-hop headers both ways and never forwards the caller's credentials", async () => {
    seen = [];
    // node:http, because fetch refuses to send a Connection header.
    const res = await new Promise<{ status: number; headers: IncomingHttpHeaders }>((resolve, reject) => {
      request(
        `${harness.url}/sbx/ws/rec/x`,
        {
          headers: {
            ...asWs,
            "x-blaxel-authorization": "Bearer key-of-ws",
            cookie: "a=b",
            connection: "x-private",
            "x-private": "hop",
            "x-kept": "end-to-end",
          },
        },
        (r) => {
          r.resume();
          resolve({ status: r.statusCode!, headers: r.headers });
        },
      )
        .on("error", reject)
        .end();
    });
    expect(res.status).toBe(200);
    expect(res.headers["x-agent"]).toBe("yes");
    expect(res.headers["x-hop-only"]).toBeUndefined();
    const h = seen[0]!.headers;
    expect(h.authorization).toBe("Bearer sandbox-token");
    expect(h["x-blaxel-authorization"]).toBeUndefined();
    expect(h.cookie).toBeUndefined();
    expect(h["x-private"]).toBeUndefined();
    expect(h["x-kept"]).toBe("end-to-end");
    expect(h.host).toBe(new URL(upstreamUrl).host);
  });

  it("a client that aborts mid-upload aborts the agent's request too", async () => {
    seen = [];
    const req = request(`${harness.url}/sbx/ws/rec/slow-upload`, { method: "PUT", headers: { ...asWs, "content-length": 10 * 1024 * 1024 } });
    req.on("error", () => {});
    req.write(Buffer.alloc(256 * 1024));
    const deadline = Date.now() + 5_000;
    while ((seen[0]?.received ?? 0) < 256 * 1024 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    req.destroy();
    while (!seen[0]?.closedEarly && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(seen[0]?.closedEarly).toBe(true);
  });
});
