import { request, type Server } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { boundRequests } from "../../../simulator/agent-host/bounds.js";

/** One sandbox's request bounds in the agent host: a queue of its own, 429 beyond it, a throwing handler failing its own request. */
let server: Server | undefined;
afterEach(() => server?.close());

function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request({ port, path, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

async function serve(handler: Parameters<typeof boundRequests>[0], bounds = { maxActive: 1, maxQueued: 1, maxConnections: 16 }): Promise<number> {
  const bounded = boundRequests(handler, (_req, socket) => socket.destroy(), bounds);
  server = createServer(bounded);
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

describe("per-sandbox request bounds", () => {
  it("one handled, one waiting, the next answered 429 at once; the waiting one runs when the first ends", async () => {
    const release: (() => void)[] = [];
    const port = await serve((req, res) => {
      if (req.url === "/slow") release.push(() => res.end("slow"));
      else res.end("fast");
    });
    const first = get(port, "/slow");
    await new Promise((r) => setTimeout(r, 50));
    const second = get(port, "/fast");
    await new Promise((r) => setTimeout(r, 50));
    const third = await get(port, "/fast");
    expect(third.status).toBe(429);
    expect(JSON.parse(third.body).error).toMatch(/too many requests in flight for this sandbox/);
    release.shift()!();
    expect(await first).toEqual({ status: 200, body: "slow" });
    expect(await second).toEqual({ status: 200, body: "fast" });
  });

  it("a streamed response frees its place once its headers are out", async () => {
    const ends: (() => void)[] = [];
    const port = await serve((req, res) => {
      if (req.url === "/stream") {
        res.writeHead(200);
        res.write("open");
        ends.push(() => res.end());
      } else res.end("next");
    });
    const stream = get(port, "/stream");
    await new Promise((r) => setTimeout(r, 50));
    expect(await get(port, "/next")).toEqual({ status: 200, body: "next" });
    ends.shift()!();
    await stream;
  });

  it("a handler that throws fails its own request only", async () => {
    const port = await serve((req, res) => {
      if (req.url === "/boom") throw new Error("boom");
      res.end("fine");
    });
    expect((await get(port, "/boom")).status).toBe(500);
    expect(await get(port, "/fine")).toEqual({ status: 200, body: "fine" });
  });
});
