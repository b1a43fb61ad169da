import type { Writable } from "node:stream";
import type { Clock } from "../../src/clock.js";
import { errors } from "../../src/errors.js";

/** A body larger than this is refused with 413 (reference §9.8). */
export const MAX_STDIN_WRITE_BYTES = 8 * 1024 * 1024;

/**
 * The write end of a process's stdin pipe (reference §9.8): writes are
 * forwarded verbatim, one at a time, so each body is atomic with respect to
 * other writers and order is kept; close sends EOF and is idempotent.
 */
export class StdinPipe {
  readonly #stream: Writable;
  readonly #clock: Clock;
  readonly #stallMs: number;
  #queue: Promise<void> = Promise.resolve();
  #closed = false;
  #lost: string | undefined;

  constructor(stream: Writable, clock: Clock, stallMs: number) {
    this.#stream = stream;
    this.#clock = clock;
    this.#stallMs = stallMs;
    // EPIPE when the process closed its end or exited: later writes are 409s, never a crash.
    stream.on("error", (err: NodeJS.ErrnoException) => {
      this.#lost = err.code ?? err.message;
    });
    stream.on("close", () => {
      this.#lost ??= "closed";
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Writes `data`; resolves once the kernel took it. 409 when closed or lost; 503 when the process stopped reading. */
  write(id: string, data: Buffer): Promise<void> {
    const run = this.#queue.then(() => this.#writeNow(id, data));
    this.#queue = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** EOF to the process. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stream.end();
  }

  #writeNow(id: string, data: Buffer): Promise<void> {
    if (this.#closed) return Promise.reject(errors.conflict(`stdin of process '${id}' is closed`));
    if (this.#lost) return Promise.reject(errors.conflict(`stdin of process '${id}' is gone (${this.#lost}): the process closed it or ended`));
    return new Promise((resolve, reject) => {
      // The pipe is full and nothing drains it: say so rather than hold the request forever (the bytes stay queued).
      const stall = this.#clock.setTimer(this.#stallMs, () => reject(errors.serviceUnavailable(`process '${id}' stopped reading its stdin`)));
      this.#stream.write(data, (err) => {
        stall.cancel();
        if (err)
          reject(errors.conflict(`stdin of process '${id}' is gone (${(err as NodeJS.ErrnoException).code ?? err.message}): the process closed it or ended`));
        else resolve();
      });
    });
  }
}
