import type { Clock } from "../../src/clock.js";
import { recordSpan, type ResourceRef } from "./record.js";
import type { UsageStore } from "./store.js";

interface OpenSpan {
  resource: ResourceRef;
  billingDimension: string;
  gb?: number;
  from: number;
}

/**
 * Open usage spans of live resources (a running sandbox, a stored image, a
 * verified domain): `start` when it begins, `stop` when it ends, `flush`
 * records everything open up to now without closing it. The metrics router
 * flushes before answering, so running resources show up to the second
 * without a timer.
 */
export class UsageMeter {
  readonly #store: UsageStore;
  readonly #clock: Clock;
  readonly #open = new Map<string, OpenSpan>();

  constructor(store: UsageStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  /**
   * Opens (or re-opens with a new size: memory changed) the span of
   * `resource` on `billingDimension`. `at` (ms, default now) lets a status
   * move that is settled late (on the next read) start at its due time.
   */
  start(resource: ResourceRef, billingDimension: string, gb?: number, at = this.#clock.now()): void {
    const key = `${resource.resourceUuid}\u0000${billingDimension}`;
    this.#close(key, at);
    this.#open.set(key, { resource, billingDimension, gb, from: at });
  }

  /** Closes the spans of a resource at `at` (default now): one dimension, or all of them (deleted). */
  stop(resourceUuid: string, billingDimension?: string, at = this.#clock.now()): void {
    for (const key of [...this.#open.keys()]) {
      const [uuid, dim] = key.split("\u0000");
      if (uuid === resourceUuid && (billingDimension === undefined || dim === billingDimension)) this.#close(key, at);
    }
  }

  /** Records every open span up to now; they stay open from now on. */
  flush(): void {
    const now = this.#clock.now();
    for (const span of this.#open.values()) {
      if (now <= span.from) continue;
      recordSpan(this.#store, span.resource, span.billingDimension, { from: span.from, to: now, gb: span.gb });
      span.from = now;
    }
  }

  /** Drops open spans without recording them (the simulator's reset). */
  clear(): void {
    this.#open.clear();
  }

  get openSpans(): number {
    return this.#open.size;
  }

  #close(key: string, at: number): void {
    const span = this.#open.get(key);
    if (!span) return;
    this.#open.delete(key);
    if (at > span.from) recordSpan(this.#store, span.resource, span.billingDimension, { from: span.from, to: at, gb: span.gb });
  }
}
