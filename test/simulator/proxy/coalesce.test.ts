import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { describe, expect, it } from "vitest";
import { Coalescer } from "../../../simulator/proxy/coalesce.js";

/** Collects what a Coalescer emits. */
function sink(): { chunks: Buffer[]; stream: Writable } {
  const chunks: Buffer[] = [];
  return { chunks, stream: new Writable({ write: (chunk: Buffer, _enc, cb) => (chunks.push(chunk), cb()) }) };
}

describe("Coalescer", () => {
  it("joins the chunks written in one turn into one write, bytes and order kept", async () => {
    const parts = Array.from({ length: 40 }, (_, i) => Buffer.alloc(1000, i));
    const out = sink();
    await pipeline(Readable.from(parts), new Coalescer(1024 * 1024), out.stream);
    expect(out.chunks.length).toBeLessThan(parts.length);
    expect(Buffer.concat(out.chunks).equals(Buffer.concat(parts))).toBe(true);
  });

  it("never emits more than maxBytes gathered plus the chunk that crossed it", async () => {
    const parts = Array.from({ length: 100 }, (_, i) => Buffer.alloc(300, i));
    const out = sink();
    await pipeline(Readable.from(parts), new Coalescer(1000), out.stream);
    expect(out.chunks.every((c) => c.length <= 1000 + 300)).toBe(true);
    expect(out.chunks.length).toBeGreaterThanOrEqual(Math.floor(30_000 / 1300)); // released once 1000 bytes gathered
    expect(Buffer.concat(out.chunks).equals(Buffer.concat(parts))).toBe(true);
  });

  it("holds input back while its output waits, however the input is spread over turns", async () => {
    // A stalled agent and a caller sending less than maxBytes per turn: every release
    // happens on the timer, outside _transform, where Transform's own check cannot see it.
    const coalescer = new Coalescer(64 * 1024);
    const sent: Buffer[] = [];
    let refused = false;
    for (let i = 0; i < 500 && !refused; i++) {
      const chunk = Buffer.alloc(1024, i);
      sent.push(chunk);
      refused = !coalescer.write(chunk);
      await new Promise((r) => setImmediate(r));
    }
    expect(refused).toBe(true);
    expect(coalescer.readableLength).toBeLessThanOrEqual(64 * 1024 + 1024);
    // Reading again lets everything through, in order.
    const out = sink();
    const done = pipeline(coalescer, out.stream);
    coalescer.end();
    await done;
    expect(Buffer.concat(out.chunks).equals(Buffer.concat(sent))).toBe(true);
  });

  it("passes on a lone chunk without waiting for more input or for the end", async () => {
    const coalescer = new Coalescer();
    const received = new Promise<Buffer>((resolve) => coalescer.once("data", resolve));
    coalescer.write(Buffer.from("typed line\n"));
    // The stream stays open: the chunk must still arrive (streamed stdin cannot wait for the end).
    expect((await received).toString()).toBe("typed line\n");
    coalescer.destroy();
  });
});
