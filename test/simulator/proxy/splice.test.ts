import { createHash } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectOnHost } from "../../../simulator/launcher/port-handoff.js";
import { spliceAvailable, splicesRunning } from "../../../simulator/proxy/splice.js";
import { until } from "../../sandbox-agent/process/helpers.js";
import { startProxy, type ProxyHarness } from "./harness.js";

/**
 * Uploads of 1 MiB and more to an in-sandbox server move in the kernel
 * (simulator/proxy/splice-body.ts): byte-exact, exactly Content-Length bytes
 * and never what follows them, a reply while the body still moves, a caller
 * that leaves or a server that answers early ending the transfer. Needs the
 * addon `npm run build` makes (scripts/build-native.mjs).
 */
const MiB = 1024 * 1024;
const auth = { authorization: "Bearer key-of-ws" };
let harness: ProxyHarness;
let app: Server;
let appPort: number;
const seen: string[] = [];
const cut: string[] = [];

function pattern(bytes: number): Buffer {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i + 4 <= bytes; i += 4) b.writeUInt32LE(i, i);
  return b;
}

beforeAll(async () => {
  harness = await startProxy();
  harness.sandboxes.set("box", { url: "http://127.0.0.1:1", token: "t", openPort: connectOnHost });
  app = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (req.url === "/early") return void res.writeHead(413, { connection: "close" }).end("too large");
    const hash = createHash("sha256");
    let bytes = 0;
    if (req.url === "/duplex") res.writeHead(200).flushHeaders(); // answers before the body is in
    req.on("data", (d: Buffer) => {
      bytes += d.length;
      hash.update(d);
    });
    req.on("close", () => {
      if (!req.complete) cut.push(req.url!);
    });
    req.on("end", () => {
      const text = JSON.stringify({ bytes, sha256: hash.digest("hex") });
      if (req.url === "/duplex") res.end(text);
      else res.writeHead(200, { "content-type": "application/json" }).end(text);
    });
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  appPort = (app.address() as AddressInfo).port;
});
afterAll(async () => {
  app?.closeAllConnections();
  await new Promise((r) => app?.close(r));
  await harness?.close();
});

function put(path: string, body: Buffer): Promise<{ status: number; connection?: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${harness.url}/sbx/ws/box/port/${appPort}${path}`, { method: "PUT", headers: { ...auth, "content-length": body.length } }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d)).on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe.skipIf(!spliceAvailable())("large uploads to an in-sandbox server, spliced in the kernel", () => {
  it("arrive byte-exact, and the connection closes after the reply (its parser never saw the body)", async () => {
    const body = pattern(9 * MiB + 12_345);
    const res = await put("/count", body);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ bytes: body.length, sha256: createHash("sha256").update(body).digest("hex") });
    expect(res.connection).toBe("close");
    await until(() => splicesRunning() === 0, "the transfer to end");
  });

  it("a server answering while it still reads gets the whole body (the reply does not stop the transfer)", async () => {
    const body = pattern(4 * MiB);
    const res = await put("/duplex", body);
    expect(JSON.parse(res.text)).toMatchObject({ bytes: body.length });
  });

  it("a server answering early ends the transfer; the caller gets its reply", async () => {
    const res = await put("/early", pattern(64 * MiB)).catch((err: NodeJS.ErrnoException) => ({ status: 0, text: err.code ?? "" }));
    // The caller may read the 413 or see the connection reset while it still writes: both are what a direct upload
    // gets. The server closing with unread request bytes sends a TCP reset, which can discard its 413 from the
    // proxy's receive queue before the proxy reads it; the caller then gets the edge's 502 for an upstream reset.
    if (res.status === 502) expect(res.text).toMatch(/reset|closed|hang up|ECONNRESET|EPIPE/i);
    else if (res.status !== 0) expect(res).toMatchObject({ status: 413, text: "too large" });
    await until(() => splicesRunning() === 0, "the transfer to end");
    expect((await put("/count", pattern(2 * MiB))).status).toBe(200); // and the proxy serves on
  });

  it("a caller leaving halfway ends the transfer and the server sees the request cut", async () => {
    const socket = connect(Number(new URL(harness.url).port), "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    socket.write(`PUT /sbx/ws/box/port/${appPort}/halfway HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\nContent-Length: ${8 * MiB}\r\n\r\n`);
    socket.write(pattern(3 * MiB));
    await until(() => seen.includes("PUT /halfway") && splicesRunning() === 1, "the transfer to start");
    socket.destroy();
    await until(() => splicesRunning() === 0 && cut.includes("/halfway"), "the transfer to end and the server to see the cut");
  });

  it("moves exactly Content-Length bytes: a request sent after the body never reaches the server", async () => {
    const socket = connect(Number(new URL(harness.url).port), "127.0.0.1");
    let reply = "";
    socket.on("data", (d) => (reply += d));
    await new Promise((r) => socket.once("connect", r));
    const body = pattern(2 * MiB);
    socket.write(`PUT /sbx/ws/box/port/${appPort}/exact HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body);
    socket.write(`GET /sbx/ws/box/port/${appPort}/smuggled HTTP/1.1\r\nHost: x\r\n\r\n`);
    await new Promise((r) => socket.once("close", r));
    expect(reply).toMatch(/^HTTP\/1.1 200/);
    expect(reply).toContain(`"bytes":${body.length}`);
    expect(seen).toContain("PUT /exact");
    expect(seen).not.toContain("GET /smuggled");
  });
});
