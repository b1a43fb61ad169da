import { systemClock, type Clock, type Timer } from "../src/clock.js";

/**
 * The simulator's clock: real time (from `base`) shifted by an offset, which
 * test hooks can freeze, advance or set. Every timestamp, expiry and status
 * move reads `now()`; status moves are settled lazily on read, so no timer
 * has to be re-armed when time jumps.
 */
export class SimClock implements Clock {
  readonly #base: Clock;
  #offset = 0;
  #frozenAt: number | undefined;

  constructor(base: Clock = systemClock) {
    this.#base = base;
  }

  now(): number {
    return this.#frozenAt ?? this.#base.now() + this.#offset;
  }

  setTimer(ms: number, fn: () => void): Timer {
    return this.#base.setTimer(ms, fn);
  }

  get frozen(): boolean {
    return this.#frozenAt !== undefined;
  }

  advance(ms: number): void {
    if (this.#frozenAt !== undefined) this.#frozenAt += ms;
    else this.#offset += ms;
  }

  set(ms: number): void {
    if (this.#frozenAt !== undefined) this.#frozenAt = ms;
    else this.#offset = ms - this.#base.now();
  }

  freeze(on: boolean): void {
    if (on && this.#frozenAt === undefined) this.#frozenAt = this.now();
    if (!on && this.#frozenAt !== undefined) {
      this.#offset = this.#frozenAt - this.#base.now();
      this.#frozenAt = undefined;
    }
  }

  /** Back to real time (test-hook reset). */
  reset(): void {
    this.#offset = 0;
    this.#frozenAt = undefined;
  }
}

/** ISO 8601 text of an instant: the shared helper (the simulator imports it from src/clock.ts directly). */
export { toIso as iso } from "../src/clock.js";
