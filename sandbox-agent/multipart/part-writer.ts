import { createHash, randomBytes } from "node:crypto";
import { constants, createWriteStream, promises as fsp } from "node:fs";
import { once } from "node:events";
import { join } from "node:path";
import { Transform, Writable, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { removeQuietly } from "../../src/atomic-file.js";
import { DATA_FILE } from "./store.js";

export interface WrittenPart {
  etag: string;
  size: number;
  /** File in the upload's directory holding the bytes (DATA_FILE when in place). */
  file: string;
  /** Offset in DATA_FILE when written in place, else null. */
  offset: number | null;
}

/**
 * Passes bytes through while computing their MD5 and count. MD5 (~650 MB/s on
 * this machine) is what bounds a part upload here; moving it to worker threads
 * was measured and gave no reliable gain on 2 cores, for 90-150 MiB more RSS.
 */
class Md5Counter extends Transform {
  readonly #md5 = createHash("md5");
  size = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    this.#md5.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }
  digest(): string {
    return this.#md5.digest("hex");
  }
}

async function writeAll(handle: fsp.FileHandle, data: Buffer, position: number | null): Promise<void> {
  let written = 0;
  while (written < data.length) {
    const { bytesWritten } = await handle.write(data, written, data.length - written, position === null ? null : position + written);
    written += bytesWritten;
  }
}

/**
 * Writes part N into the shared data file at its offset. If the part turns out
 * larger than the stride it cannot stay there: what was written so far is
 * copied to a file of its own and the rest follows it there ("spill").
 */
class InPlaceSink extends Writable {
  written = 0;
  spilled?: string;
  #data?: fsp.FileHandle;
  #spill?: fsp.FileHandle;

  constructor(private readonly dir: string, private readonly partNumber: number, private readonly offset: number, private readonly stride: number) {
    super({ highWaterMark: 1024 * 1024 });
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.#write(chunk).then(() => done(), done);
  }

  async #write(chunk: Buffer): Promise<void> {
    this.#data ??= await fsp.open(join(this.dir, DATA_FILE), constants.O_RDWR | constants.O_CREAT, 0o600);
    if (!this.#spill && this.written + chunk.length > this.stride) await this.#startSpill();
    if (this.#spill) await writeAll(this.#spill, chunk, null);
    else await writeAll(this.#data, chunk, this.offset + this.written);
    this.written += chunk.length;
  }

  async #startSpill(): Promise<void> {
    this.spilled = `part-${this.partNumber}.${randomBytes(6).toString("hex")}`;
    this.#spill = await fsp.open(join(this.dir, this.spilled), "wx", 0o600);
    const buffer = Buffer.allocUnsafe(Math.min(this.written, 4 * 1024 * 1024));
    for (let copied = 0; copied < this.written; ) {
      const { bytesRead } = await this.#data!.read(buffer, 0, Math.min(buffer.length, this.written - copied), this.offset + copied);
      await writeAll(this.#spill, buffer.subarray(0, bytesRead), null);
      copied += bytesRead;
    }
  }

  override _final(done: (err?: Error | null) => void): void {
    this.#close().then(() => done(), done);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.#close().then(() => done(err), () => done(err));
  }

  async #close(): Promise<void> {
    const handles = [this.#data, this.#spill];
    this.#data = this.#spill = undefined;
    await Promise.all(handles.map((h) => h?.close()));
  }
}

/** Streams a part into a file of its own. */
export async function writeOwnFile(dir: string, partNumber: number, stream: Readable): Promise<WrittenPart> {
  const file = `part-${partNumber}.${randomBytes(6).toString("hex")}`;
  const counter = new Md5Counter();
  const out = createWriteStream(join(dir, file), { flags: "wx", mode: 0o600, highWaterMark: 1024 * 1024 });
  try {
    // Attached at once: the body may fail (413) before the file is even open.
    await pipeline(stream, counter, out);
  } catch (err) {
    // A failure during the open: the file appears when the open completes, and the stream closes after it.
    if (!out.closed) await once(out, "close").catch(() => undefined);
    await removeQuietly(join(dir, file));
    throw err;
  }
  return { etag: counter.digest(), size: counter.size, file, offset: null };
}

/**
 * Streams a part into the data file at (N-1) * stride, so that a complete of
 * equal-size parts needs no copy. Bytes written there before a failure are
 * harmless: no row points at them.
 */
export async function writeInPlace(dir: string, partNumber: number, stride: number, stream: Readable): Promise<WrittenPart> {
  const offset = (partNumber - 1) * stride;
  const counter = new Md5Counter();
  const sink = new InPlaceSink(dir, partNumber, offset, stride);
  try {
    await pipeline(stream, counter, sink);
  } catch (err) {
    if (sink.spilled) await removeQuietly(join(dir, sink.spilled));
    throw err;
  }
  const etag = counter.digest();
  if (sink.spilled) return { etag, size: counter.size, file: sink.spilled, offset: null };
  return { etag, size: counter.size, file: DATA_FILE, offset };
}
