import { readdirSync, readFileSync, statSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { agentClient, md5 } from "../../helpers/multipart.js";

/** application/octet-stream bodies: the body is the file (curl -T), for filesystem writes and multipart parts. */
let agent: TestAgent | undefined;
afterEach(async () => {
  await agent?.stop();
  agent = undefined;
});

const OCTETS = "application/octet-stream";

/** A PUT whose body is sent chunked (no Content-Length), as a stream of unknown length is. */
function putChunked(url: string, chunks: Buffer[]): Promise<{ status: number; body: { error?: string } }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "PUT", headers: { "content-type": OCTETS } }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

describe("filesystem writes with a raw body", () => {
  it("writes the body as the file, with ?permissions=", async () => {
    agent = await startTestAgent();
    const api = agentClient(agent.url);
    const data = Buffer.alloc(300_000, 9);
    const res = await api.put("/filesystem/raw/blob.bin?permissions=0600").set("Content-Type", OCTETS).send(data);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Binary file uploaded successfully", path: "/raw/blob.bin", size: data.length });
    const host = join(agent.root, "raw", "blob.bin");
    expect(readFileSync(host).equals(data)).toBe(true);
    expect(statSync(host).mode & 0o777).toBe(0o600);
  });
});

describe("multipart parts with a raw body", () => {
  it("stores the body as the part (etag = its MD5) and completes like a form part", async () => {
    agent = await startTestAgent();
    const api = agentClient(agent.url);
    const id = await api.initiate("/raw-parts.bin");
    const one = Buffer.alloc(200_000, 1);
    const two = Buffer.from("tail");
    const r1 = await api.put(`/filesystem-multipart/${id}/part?partNumber=1`).set("Content-Type", OCTETS).send(one);
    expect(r1.body).toEqual({ partNumber: 1, etag: md5(one), size: one.length });
    const r2 = await putChunked(`${agent.url}/filesystem-multipart/${id}/part?partNumber=2`, [two]);
    expect(r2.body).toEqual({ partNumber: 2, etag: md5(two), size: two.length });
    const done = await api.complete(id, [
      { partNumber: 1, etag: md5(one) },
      { partNumber: 2, etag: md5(two) },
    ]);
    expect(done.status).toBe(200);
    expect(readFileSync(join(agent.root, "raw-parts.bin")).equals(Buffer.concat([one, two]))).toBe(true);
  });

  it("answers 413 over --max-part-size, from the Content-Length or while streaming, and keeps nothing", async () => {
    agent = await startTestAgent({ maxPartSize: "1KiB" });
    const api = agentClient(agent.url);
    const id = await api.initiate("/big");
    const declared = await api.put(`/filesystem-multipart/${id}/part?partNumber=1`).set("Content-Type", OCTETS).send(Buffer.alloc(4096, 1));
    expect(declared.status).toBe(413);
    expect(declared.body.error).toMatch(/4096 bytes exceeds the maximum size of 1024 bytes/);
    const streamed = await putChunked(`${agent.url}/filesystem-multipart/${id}/part?partNumber=1`, [Buffer.alloc(800, 1), Buffer.alloc(800, 2)]);
    expect(streamed.status).toBe(413);
    expect(streamed.body.error).toMatch(/maximum size of 1024 bytes/);
    // Over the limit in its first chunk: the body fails while the part's file is still being opened.
    expect((await putChunked(`${agent.url}/filesystem-multipart/${id}/part?partNumber=1`, [Buffer.alloc(4096, 3)])).status).toBe(413);
    expect(readdirSync(join(agent.dataDir, "uploads", id))).toEqual([]);
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).body.parts).toEqual([]);
    expect((await api.put(`/filesystem-multipart/${id}/part?partNumber=1`).set("Content-Type", OCTETS).send(Buffer.alloc(1024, 1))).status).toBe(200);
  });

  it("leaves no part behind when the body is cut short", async () => {
    agent = await startTestAgent();
    const api = agentClient(agent.url);
    const id = await api.initiate("/cut");
    const { port } = new URL(agent.url);
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write(`PUT /filesystem-multipart/${id}/part?partNumber=1 HTTP/1.1\r\nHost: x\r\nContent-Type: ${OCTETS}\r\nContent-Length: 1000000\r\n\r\n`);
        socket.write(Buffer.alloc(200_000, 7), () =>
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 100),
        );
      });
      socket.on("error", reject);
    });
    await expect.poll(() => readdirSync(join(agent!.dataDir, "uploads", id)), { timeout: 3_000 }).toEqual([]);
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).body.parts).toEqual([]);
  });
});
