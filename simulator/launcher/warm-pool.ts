import type { ChildProcess } from "node:child_process";
import type { WarmPoolState } from "./types.js";

/**
 * Agents started ahead of need, shared by the launchers that pre-start (process, bwrap): each warm item is a
 * process running simulator/launcher/warm-agent.ts, which sends one IPC message once its modules are loaded and
 * then waits for its sandbox. An item is handed out once and never comes back: a sandbox that ran is never
 * reused, the pool starts a fresh one in its place (refill). Items are kept per key, the launcher's notion of
 * which specs one warm item fits (the bwrap launcher: same image, drives and network).
 */
export interface WarmPoolParts<T, S> {
  /** How many idle items to keep per key (0: no pool). */
  size: number;
  /** Which specs one item fits: items of one key are interchangeable. */
  keyOf(spec: S): string;
  /** Starts one item for specs like `spec`; undefined when it cannot (the next cold start reports why). */
  spawn(spec: S): T | undefined;
  /** The item's warm agent (or the process whose end is the item's end). */
  child(item: T): ChildProcess;
  /** Resolves once the rest of the item is up after its agent has loaded (e.g. its network); false when it failed. */
  afterLoad?(item: T): Promise<boolean>;
  /** Once, when the item's process exits, taken or not (e.g. to remove what is left of its directories). */
  exited?(item: T): void;
  /** An item found dead or disconnected when taken. */
  discard(item: T): void;
  /** Stops an item the pool still holds when it closes (idle, or being taken); resolves once its processes are gone. */
  stop(item: T): Promise<void>;
}

interface Idle<T> {
  item: T;
  key: string;
  /** Resolves when the item is ready for a sandbox; false when it died first. */
  ready: Promise<boolean>;
}

const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

export class WarmPool<T, S> {
  private readonly idle: Idle<T>[] = [];
  /** Items out of `idle` whose take() still waits for them to be ready: not handed out yet, so still the pool's to stop. */
  private readonly taking = new Set<Idle<T>>();
  private closed = false;

  constructor(private readonly parts: WarmPoolParts<T, S>) {}

  get size(): number {
    return this.parts.size;
  }

  /** The oldest item for this spec, waiting for it to finish warming if need be (still sooner than a cold start). */
  async take(spec: S): Promise<T | undefined> {
    if (this.parts.size === 0) return undefined;
    const key = this.parts.keyOf(spec);
    for (;;) {
      const at = this.idle.findIndex((w) => w.key === key);
      if (at === -1) return undefined;
      const warm = this.idle.splice(at, 1)[0]!;
      const child = this.parts.child(warm.item);
      this.taking.add(warm);
      const ready = await warm.ready;
      const stillOurs = this.taking.delete(warm); // false: close() took it back and stopped it meanwhile
      if (!stillOurs) return undefined;
      if (ready && alive(child) && child.connected) return warm.item;
      this.parts.discard(warm.item);
    }
  }

  /** Starts items for specs like this one until the pool holds `size` of them. */
  refill(spec: S): void {
    if (this.parts.size === 0 || this.closed) return;
    const key = this.parts.keyOf(spec);
    while (!this.closed && this.idle.filter((w) => w.key === key).length < this.parts.size) {
      let item: T | undefined;
      try {
        item = this.parts.spawn(spec);
      } catch {
        return; // refill runs in a start's `finally`: a throw there would lose the sandbox just started
      }
      if (item === undefined) return;
      const child = this.parts.child(item);
      const loaded = new Promise<boolean>((resolve) => {
        child.once("message", () => resolve(true));
        child.once("exit", () => resolve(false));
      });
      const afterLoad = this.parts.afterLoad;
      const ready = afterLoad ? loaded.then(async (ok) => ok && (await afterLoad(item))) : loaded;
      const warm: Idle<T> = { item, key, ready };
      child.once("exit", () => {
        const at = this.idle.indexOf(warm);
        if (at !== -1) this.idle.splice(at, 1);
        this.parts.exited?.(item);
      });
      this.idle.push(warm);
    }
  }

  state(): WarmPoolState {
    return {
      size: this.parts.size,
      idle: this.idle.length,
      pids: this.idle.flatMap((w) => {
        const pid = this.parts.child(w.item).pid;
        return pid ? [pid] : [];
      }),
    };
  }

  /** Resolves once every idle item is ready (benches, tests). */
  async warmed(): Promise<void> {
    await Promise.all(this.idle.map((w) => w.ready));
  }

  /**
   * Stops the idle items and those a take() still waits for (handed-out ones belong to their sandboxes); no item
   * starts after. Every item is stopped whether it finished warming or not: one still starting is a process tree too.
   */
  async close(): Promise<void> {
    this.closed = true;
    const held = [...this.idle.splice(0), ...this.taking];
    this.taking.clear();
    await Promise.all(held.map((w) => this.parts.stop(w.item)));
  }
}

/** Ends `child` with `signal` and resolves once it has exited (at once if it already has). */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  return new Promise<void>((resolve) => {
    if (!alive(child)) return resolve();
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}
