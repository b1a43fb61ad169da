import { systemClock, type Clock } from "../../src/clock.js";

/** How long a finished temp file's name is still recognised: its events may be read this late (a busy loop). */
const FORGET_AFTER_MS = 30_000;
/** Names remembered before a sweep of the finished ones: keeps a write-heavy agent's map small. */
const SWEEP_AT = 1_000;

/**
 * The names of the agent's own short-lived files in the sandbox: the temp
 * file an atomic write renames over its target (`.<tag>.tmp`), a multipart
 * upload's assembly file, a same-mount probe. A watcher reports the user's
 * names only, as the reference daemon (which writes in place) does: its
 * `TestFileSystemWatch` expects the first event to name the file written.
 * Names are random (48 bits and more), so one of the user's never collides.
 */
export class OwnWrites {
  /** name → when it may be forgotten (Infinity while the write is in flight). */
  readonly #names = new Map<string, number>();
  readonly #clock: Clock;

  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  /** `name` is about to be created by the agent; call the result once it is renamed away or removed. */
  begin(name: string): () => void {
    if (this.#names.size >= SWEEP_AT) this.#sweep();
    this.#names.set(name, Infinity);
    return () => {
      if (this.#names.has(name)) this.#names.set(name, this.#clock.now() + FORGET_AFTER_MS);
    };
  }

  has(name: string): boolean {
    const until = this.#names.get(name);
    return until !== undefined && until > this.#clock.now();
  }

  get size(): number {
    return this.#names.size;
  }

  #sweep(): void {
    const now = this.#clock.now();
    for (const [name, until] of this.#names) if (until <= now) this.#names.delete(name);
  }
}
