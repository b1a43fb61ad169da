import { createHash, randomBytes } from "node:crypto";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { afterAll, describe, expect, it } from "vitest";
import { Md5Pool } from "../../../sandbox-agent/multipart/md5-pool.js";

const pool = new Md5Pool(2);
afterAll(() => pool.close());

async function hashThrough(p: Md5Pool, data: Buffer, chunk = 64 * 1024) {
  const counter = p.counter();
  const chunks = Array.from({ length: Math.ceil(data.length / chunk) }, (_, i) => data.subarray(i * chunk, (i + 1) * chunk));
  let passed = 0;
  await pipeline(Readable.from(chunks), counter, new Writable({ write(c: Buffer, _e, cb) { passed += c.length; cb(); } }));
  return { etag: await counter.digest(), size: counter.size, passed };
}

const md5 = (b: Buffer) => createHash("md5").update(b).digest("hex");

describe("Md5Pool", () => {
  it("computes the same MD5 as node:crypto and passes every byte through", async () => {
    const data = randomBytes(20 * 1024 * 1024 + 123); // beyond the in-flight bound: exercises backpressure
    expect(await hashThrough(pool, data)).toEqual({ etag: md5(data), size: data.length, passed: data.length });
  });
  it("keeps concurrent sessions apart", async () => {
    const inputs = Array.from({ length: 6 }, (_, i) => randomBytes(300_000 + i));
    const results = await Promise.all(inputs.map((d) => hashThrough(pool, d, 10_000)));
    expect(results.map((r) => r.etag)).toEqual(inputs.map(md5));
  });
  it("hashes an empty body", async () => {
    expect((await hashThrough(pool, Buffer.alloc(0))).etag).toBe(md5(Buffer.alloc(0)));
  });
  it("falls back to hashing inline once closed", async () => {
    const closed = new Md5Pool(1);
    await closed.close();
    const data = randomBytes(1000);
    expect((await hashThrough(closed, data)).etag).toBe(md5(data));
  });
});
