/**
 * One async mutex per key: callers with the same key run one after another,
 * in arrival order; different keys never wait for each other. The reference
 * daemon locks per mount path because two concurrent mounts at one path
 * corrupt the FUSE client's state (peers.md §1).
 */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Keys currently held or waited for (for tests and diagnostics). */
  get size(): number {
    return this.#tails.size;
  }
}
