import { availableParallelism } from "node:os";

/**
 * Admission control for sandbox starts. An agent's start is CPU-bound (Node
 * loading the agent's code); a hundred started at once share the cores a
 * hundred ways, each takes a hundred times longer, the simulator itself gets a
 * hundredth of the CPU, and readiness deadlines fire for agents that were in
 * fact fine. So at most `concurrency` starts run at once and the rest wait in
 * arrival order: a busy machine makes creates slower, never failed.
 *
 * Pure bookkeeping (no timers, no clock): `run` resolves in FIFO order as slots
 * free up; `onWait` hears how many starts are ahead while a start waits.
 */
export class StartQueue {
  private active = 0;
  private readonly waiting: { admit: () => void; onWait?: (ahead: number) => void }[] = [];

  constructor(readonly concurrency: number = defaultStartConcurrency()) {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`start concurrency must be a whole number >= 1, got ${concurrency}`);
  }

  /** Starts waiting for a slot right now (queued) plus those running. */
  get queued(): number {
    return this.waiting.length;
  }

  get running(): number {
    return this.active;
  }

  /**
   * Runs `start` once a slot is free. `onWait(ahead)` is called when the start
   * has to wait, with how many queued starts are before it, and again each time
   * it moves up (never once admitted).
   */
  async run<T>(start: () => Promise<T>, onWait?: (ahead: number) => void): Promise<T> {
    if (this.active < this.concurrency && this.waiting.length === 0) this.active++;
    else {
      await new Promise<void>((admit) => {
        this.waiting.push({ admit, onWait });
        onWait?.(this.waiting.length - 1);
      });
    }
    try {
      return await start();
    } finally {
      this.release();
    }
  }

  private release(): void {
    const next = this.waiting.shift();
    if (!next) {
      this.active--;
      return;
    }
    // The slot passes straight to the next start (active stays the same); the others each moved up by one.
    next.admit();
    this.waiting.forEach((w, i) => w.onWait?.(i));
  }
}

/**
 * One start per core, at least two: starts are mostly CPU, and a start also
 * waits on I/O (the root filesystem's overlay, the network's helper), so two on
 * one core still keep it busy while leaving the simulator its share.
 */
export function defaultStartConcurrency(): number {
  return Math.max(2, availableParallelism());
}
