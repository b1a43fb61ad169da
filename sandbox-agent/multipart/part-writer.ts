import { createHash, randomBytes } from "node:crypto";
import { constants, promises as fsp } from "node:fs";
import { join } from "node:path";
import { Writable, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { removeQuietly } from "../../src/atomic-file.js";
import { DATA_FILE } from "./upload-store.js";

export interface WrittenPart {
  etag: string;
  size: number;
  /** File in the upload's directory holding the bytes (DATA_FILE when in place). */
  file: string;
  /** Offset in DATA_FILE when written in place, else null. */
  offset: number | null;
}

/**
 * Writes `length` bytes of `chunks` at `position` (null: the file's own
 * offset) through the promise API: a FileHandle's close waits for its writes
 * in flight, so a sink destroyed mid-write cannot close the descriptor under one.
 */
async function writeAll(handle: fsp.FileHandle, chunks: Buffer[], length: number, position: number | null): Promise<void> {
  const { bytesWritten } = await handle.writev(chunks, position ?? undefined);
  if (bytesWritten === length) return;
  // A short write (rare on a regular file): the rest follows it.
  const rest = Buffer.concat(chunks).subarray(bytesWritten);
  await writeAll(handle, [rest], rest.length, position === null ? null : position + bytesWritten);
}

/**
 * The one stream hop of a part: hashes (MD5, the etag), counts and writes its
 * bytes. Each batch goes to the thread pool first and is hashed while it is
 * written; chunks that arrive behind a write in flight go out together in one
 * writev. MD5 (~650 MB/s on one core here) is what bounds a part upload;
 * moving it to worker threads was measured and gave no reliable gain on 2
 * cores, for 90-150 MiB more RSS.
 */
abstract class PartSink extends Writable {
  readonly #md5 = createHash("md5");
  /** The last batch's store, settled: closing waits for it (a spill file may be opening). */
  #storing: Promise<unknown> = Promise.resolve();
  size = 0;

  constructor() {
    super({ highWaterMark: 1024 * 1024 });
  }

  /** Writes the bytes [start, start + length) of the part. */
  protected abstract store(chunks: Buffer[], start: number, length: number): Promise<void>;
  /** Closes the part's files; called once the bytes are all written, or on failure. */
  protected abstract close(): Promise<void>;

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.#take([chunk], done);
  }

  override _writev(entries: { chunk: Buffer }[], done: (err?: Error | null) => void): void {
    this.#take(
      entries.map((e) => e.chunk),
      done,
    );
  }

  #take(chunks: Buffer[], done: (err?: Error | null) => void): void {
    const start = this.size;
    for (const chunk of chunks) this.size += chunk.length;
    // store() settles asynchronously, so the next batch cannot reach the hash before this one.
    const stored = this.store(chunks, start, this.size - start);
    this.#storing = stored.catch(() => undefined);
    stored.then(() => done(), done);
    for (const chunk of chunks) this.#md5.update(chunk);
  }

  etag(): string {
    return this.#md5.digest("hex");
  }

  override _final(done: (err?: Error | null) => void): void {
    this.close().then(() => done(), done);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.#storing
      .then(() => this.close())
      .then(
        () => done(err),
        () => done(err),
      );
  }
}

/**
 * pipeline(), but a failure settles only once the sink has closed its files:
 * pipeline does not wait for that when it is the source that failed, and the
 * caller's clean-up must not remove a file the sink is still creating.
 */
async function pipeInto(stream: Readable, sink: PartSink): Promise<void> {
  try {
    await pipeline(stream, sink);
  } catch (err) {
    if (!sink.closed) await new Promise((resolve) => sink.once("close", resolve));
    throw err;
  }
}

/** A part in a file of its own, opened by the caller. */
class OwnFileSink extends PartSink {
  constructor(private readonly handle: fsp.FileHandle) {
    super();
  }

  protected override store(chunks: Buffer[], _start: number, length: number): Promise<void> {
    return writeAll(this.handle, chunks, length, null);
  }

  protected override close(): Promise<void> {
    return this.handle.close(); // a FileHandle closes once, however often it is asked
  }
}

/**
 * Writes part N into the shared data file at its offset. If the part turns out
 * larger than the stride it cannot stay there: what was written so far is
 * copied to a file of its own and the rest follows it there ("spill").
 */
class InPlaceSink extends PartSink {
  spilled?: string;
  #spill?: fsp.FileHandle;

  constructor(
    private readonly data: fsp.FileHandle,
    private readonly dir: string,
    private readonly partNumber: number,
    private readonly offset: number,
    private readonly stride: number,
  ) {
    super();
  }

  protected override async store(chunks: Buffer[], start: number, length: number): Promise<void> {
    if (!this.#spill && start + length > this.stride) await this.#startSpill(start);
    if (this.#spill) await writeAll(this.#spill, chunks, length, null);
    else await writeAll(this.data, chunks, length, this.offset + start);
  }

  async #startSpill(written: number): Promise<void> {
    this.spilled = `part-${this.partNumber}.${randomBytes(6).toString("hex")}`;
    this.#spill = await fsp.open(join(this.dir, this.spilled), "wx", 0o600);
    const buffer = Buffer.allocUnsafe(Math.min(written, 4 * 1024 * 1024));
    for (let copied = 0; copied < written;) {
      const { bytesRead } = await this.data.read(buffer, 0, Math.min(buffer.length, written - copied), this.offset + copied);
      await writeAll(this.#spill, [buffer.subarray(0, bytesRead)], bytesRead, null);
      copied += bytesRead;
    }
  }

  protected override async close(): Promise<void> {
    await Promise.all([this.data.close(), this.#spill?.close()]);
  }
}

/** Streams a part into a file of its own. */
export async function writeOwnFile(dir: string, partNumber: number, stream: Readable): Promise<WrittenPart> {
  const file = `part-${partNumber}.${randomBytes(6).toString("hex")}`;
  // Opened before the body flows: a stream that fails at once cannot have its file created after the clean-up below.
  const sink = new OwnFileSink(await fsp.open(join(dir, file), "wx", 0o600));
  try {
    await pipeInto(stream, sink);
  } catch (err) {
    await removeQuietly(join(dir, file));
    throw err;
  }
  return { etag: sink.etag(), size: sink.size, file, offset: null };
}

/**
 * Streams a part into the data file at (N-1) * stride, so that a complete of
 * equal-size parts needs no copy. Bytes written there before a failure are
 * harmless: no row points at them.
 */
export async function writeInPlace(dir: string, partNumber: number, stride: number, stream: Readable): Promise<WrittenPart> {
  const offset = (partNumber - 1) * stride;
  const data = await fsp.open(join(dir, DATA_FILE), constants.O_RDWR | constants.O_CREAT, 0o600);
  const sink = new InPlaceSink(data, dir, partNumber, offset, stride);
  try {
    await pipeInto(stream, sink);
  } catch (err) {
    if (sink.spilled) await removeQuietly(join(dir, sink.spilled));
    throw err;
  }
  const etag = sink.etag();
  if (sink.spilled) return { etag, size: sink.size, file: sink.spilled, offset: null };
  return { etag, size: sink.size, file: DATA_FILE, offset };
}
