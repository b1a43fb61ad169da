/**
 * Time is injected so what-is-due logic, expiry and timestamps are testable
 * without sleeping. `systemClock` is the real one; `FakeClock` (tests) only
 * moves when told to.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`; never overflows for long delays. */
  setTimer(ms: number, fn: () => void): Timer;
}

/** setTimeout takes a signed 32-bit delay: longer ones fire at once. Chain instead. */
export const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    let handle: NodeJS.Timeout;
    const due = Date.now() + Math.max(0, ms);
    const arm = () => {
      const left = due - Date.now();
      if (left > MAX_TIMER_MS) handle = setTimeout(arm, MAX_TIMER_MS);
      else handle = setTimeout(fn, Math.max(0, left));
      handle.unref?.();
    };
    arm();
    return { cancel: () => clearTimeout(handle) };
  },
};

export class FakeClock implements Clock {
  #now: number;
  #timers = new Set<{ due: number; fn: () => void }>();

  constructor(start: number | string | Date = "2026-01-01T00:00:00Z") {
    this.#now = typeof start === "number" ? start : new Date(start).getTime();
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const entry = { due: this.#now + Math.max(0, ms), fn };
    this.#timers.add(entry);
    return { cancel: () => this.#timers.delete(entry) };
  }

  /** Moves time forward, firing every timer that falls due, in due order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const next = [...this.#timers].filter((t) => t.due <= target).sort((a, b) => a.due - b.due)[0];
      if (!next) break;
      this.#timers.delete(next);
      this.#now = Math.max(this.#now, next.due);
      next.fn();
    }
    this.#now = target;
  }

  set(time: number | string | Date): void {
    this.#now = typeof time === "number" ? time : new Date(time).getTime();
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }
}

export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}
