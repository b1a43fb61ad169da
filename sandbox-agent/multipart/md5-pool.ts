import { createHash } from "node:crypto";
import { availableParallelism } from "node:os";
import { Transform } from "node:stream";
import { Worker } from "node:worker_threads";

/**
 * MD5 of part bodies, computed on worker threads. On the main thread MD5
 * (~650 MB/s here) runs in series with busboy's parsing and caps a part upload
 * well below what the disk takes; on a worker it runs beside it. Each part is
 * one session on one worker (messages to a worker stay in order); at most
 * MAX_IN_FLIGHT bytes of a session wait for the worker, so memory stays flat.
 */
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { createHash } = require("node:crypto");
const sessions = new Map();
parentPort.on("message", (m) => {
  let hash = sessions.get(m.id);
  if (!hash) { hash = createHash("md5"); sessions.set(m.id, hash); }
  if (m.chunk) { hash.update(m.chunk); parentPort.postMessage({ id: m.id, acked: m.chunk.byteLength }); }
  if (m.digest) { sessions.delete(m.id); parentPort.postMessage({ id: m.id, hex: hash.digest("hex") }); }
});`;

const MAX_IN_FLIGHT = 8 * 1024 * 1024;

interface Session {
  inFlight: number;
  onAck?: () => void;
  onDigest?: (hex: string) => void;
}

export class Md5Pool {
  readonly #size: number;
  readonly #workers: Worker[] = [];
  readonly #sessions = new Map<number, Session>();
  #next = 0;
  #ids = 0;
  #closed = false;

  constructor(size = Math.min(2, Math.max(1, availableParallelism() - 1))) {
    this.#size = size;
  }

  #worker(): Worker {
    if (this.#workers.length < this.#size) {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      worker.unref();
      worker.on("message", (m: { id: number; acked?: number; hex?: string }) => {
        const session = this.#sessions.get(m.id);
        if (!session) return;
        if (m.acked !== undefined) {
          session.inFlight -= m.acked;
          if (session.inFlight <= MAX_IN_FLIGHT / 2) session.onAck?.();
        }
        if (m.hex !== undefined) {
          this.#sessions.delete(m.id);
          session.onDigest?.(m.hex);
        }
      });
      this.#workers.push(worker);
      return worker;
    }
    return this.#workers[this.#next++ % this.#workers.length]!;
  }

  /** A pass-through stream computing the MD5 and size of what flows through it. */
  counter(): Md5Counter {
    if (this.#closed || this.#size === 0) return new InlineMd5Counter();
    return new PooledMd5Counter(this, this.#worker(), ++this.#ids);
  }

  register(id: number, session: Session): void {
    this.#sessions.set(id, session);
  }

  forget(id: number): void {
    this.#sessions.delete(id);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#workers.splice(0).map((w) => w.terminate()));
  }
}

export abstract class Md5Counter extends Transform {
  size = 0;
  abstract digest(): Promise<string>;
}

class InlineMd5Counter extends Md5Counter {
  readonly #md5 = createHash("md5");
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    this.#md5.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }
  digest(): Promise<string> {
    return Promise.resolve(this.#md5.digest("hex"));
  }
}

class PooledMd5Counter extends Md5Counter {
  readonly #session: Session = { inFlight: 0 };

  constructor(private readonly pool: Md5Pool, private readonly worker: Worker, private readonly id: number) {
    super();
    pool.register(id, this.#session);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    // Copy into a buffer of its own and transfer it: the chunk itself is still
    // on its way to the disk, and a view would clone its whole backing store.
    const copy = new Uint8Array(chunk.length);
    copy.set(chunk);
    this.worker.postMessage({ id: this.id, chunk: copy }, [copy.buffer]);
    this.#session.inFlight += chunk.length;
    this.size += chunk.length;
    if (this.#session.inFlight <= MAX_IN_FLIGHT) return done(null, chunk);
    this.#session.onAck = () => {
      this.#session.onAck = undefined;
      done(null, chunk);
    };
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    // A stream also ends in _destroy after a clean finish, when its digest is
    // still to come; only a failed one is dropped here (and on the worker).
    if (err) {
      this.pool.forget(this.id);
      this.worker.postMessage({ id: this.id, digest: true });
    }
    done(err);
  }

  digest(): Promise<string> {
    return new Promise((resolve) => {
      this.#session.onDigest = resolve;
      this.worker.postMessage({ id: this.id, digest: true });
    });
  }
}
