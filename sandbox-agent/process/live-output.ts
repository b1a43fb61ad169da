import { promises as fsp } from "node:fs";
import { capLog, readFully, readLast, STREAMS, type LogFiles, type StreamName } from "./output.js";

export interface OutputListener {
  chunk(stream: StreamName, data: Buffer): void;
  /** The process ended and its last output has been delivered. */
  end(): void;
  /**
   * False while the listener holds all it may (its reader is behind): the files are not even read for it,
   * and what it missed is reported through `skipped`.
   */
  ready?(): boolean;
  /** Bytes skipped before the next chunk: the listener was not ready, or the writer outran MAX_PUMP_BYTES a tick. */
  skipped?(stream: StreamName, bytes: number, why: "not-ready" | "too-fast"): void;
  /** A line from the agent for followers only, not part of the output (stop and kill notices). */
  notice?(text: string): void;
}

export interface LiveOutputOptions {
  /** Per-stream cap: a reader sees the last this many bytes; on disk old ≤ cap and live is capped past half of it. */
  capBytes: number;
  /** Persists the running count of discarded bytes. */
  onDropped(dropped: Record<StreamName, number>): void;
  dropped?: Record<StreamName, number>;
  /** Offsets already delivered (an adopted process after a restart: its current sizes). */
  offsets?: Record<StreamName, number>;
}

/** Bytes delivered to followers per stream and tick at most (10 MB/s each); a writer faster than that is followed with gaps. */
const MAX_PUMP_BYTES = 1024 * 1024;
const FAST_POLL_MS = 100; // while someone follows the output, or the process writes fast
const SLOW_POLL_MS = 1_000; // otherwise: only to enforce the cap

/**
 * Follows the output files of one running process: delivers new bytes to
 * listeners and enforces the size cap. Every file operation runs on one serial
 * queue, so a capping never races a read and no byte is delivered twice.
 */
export class LiveOutput {
  readonly #files: LogFiles;
  readonly #options: LiveOutputOptions;
  readonly #offsets: Record<StreamName, number>;
  readonly #dropped: Record<StreamName, number>;
  readonly #listeners = new Set<OutputListener>();
  #queue: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #ended = false;
  /**
   * Wrote more than a quarter of the cap since the last tick: check ten times
   * as often, so the files stay near the cap. Starts true: a process that
   * floods its output from the first instant is caught after 100 ms.
   */
  #fastWriter = true;
  #grown = 0;

  constructor(files: LogFiles, options: LiveOutputOptions) {
    this.#files = files;
    this.#options = options;
    this.#offsets = { ...(options.offsets ?? { stdout: 0, stderr: 0 }) };
    this.#dropped = { ...(options.dropped ?? { stdout: 0, stderr: 0 }) };
    this.#schedule();
  }

  get dropped(): Readonly<Record<StreamName, number>> {
    return this.#dropped;
  }

  /**
   * Adds a listener and returns what was written so far (up to `backlogBytes`
   * per stream), with no gap and no overlap between backlog and live chunks.
   */
  subscribe(listener: OutputListener, backlogBytes: number): Promise<{ backlog: Record<StreamName, { data: Buffer; dropped: number }>; unsubscribe(): void }> {
    return this.#enqueue(async () => {
      await this.#pumpAll();
      const backlog = {} as Record<StreamName, { data: Buffer; dropped: number }>;
      for (const s of STREAMS) backlog[s] = await this.#files.readTail(s, backlogBytes, this.#dropped[s], this.#offsets[s]);
      if (this.#ended) listener.end();
      else this.#listeners.add(listener);
      this.#reschedule();
      return {
        backlog,
        unsubscribe: () => {
          this.#listeners.delete(listener);
        },
      };
    });
  }

  /**
   * Tells the followers something about the process that is not its output
   * (reference §4.4: stop and kill notices reach the live streams, not the
   * log files), after the output written so far.
   */
  notice(text: string): void {
    void this.#enqueue(async () => {
      await this.#pumpAll().catch(() => undefined);
      for (const l of this.#listeners) l.notice?.(text);
    });
  }

  /** Stops polling after a last read and capping, then tells listeners the output is complete. */
  finish(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    return this.#enqueue(async () => {
      if (this.#ended) return;
      await this.#pumpAll();
      await this.#capAll();
      this.#ended = true;
      for (const l of this.#listeners) l.end();
      this.#listeners.clear();
    });
  }

  /** Stops polling without a final read (agent shutdown: the process keeps running); followers' streams end now. */
  abandon(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#ended = true;
    for (const l of this.#listeners) l.end();
    this.#listeners.clear();
  }

  #enqueue<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(task);
    this.#queue = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  #schedule(): void {
    if (this.#ended) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#enqueue(async () => {
          this.#grown = 0;
          await this.#pumpAll();
          this.#fastWriter = this.#grown > this.#options.capBytes / 4;
          await this.#capAll();
        })
          .catch(() => undefined) // a vanished file (process pruned) ends nothing; the next tick retries
          .finally(() => {
            if (!this.#ended && !this.#timer) this.#schedule();
          });
      },
      this.#listeners.size > 0 || this.#fastWriter ? FAST_POLL_MS : SLOW_POLL_MS,
    );
    this.#timer.unref();
  }

  /** A new follower wants fast polling now, not after the current slow tick. */
  #reschedule(): void {
    if (this.#ended || !this.#timer) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#schedule();
  }

  async #pumpAll(): Promise<void> {
    for (const s of STREAMS) await this.#pump(s);
  }

  async #pump(stream: StreamName): Promise<void> {
    const size = (await fsp.stat(this.#files.live(stream)).catch(() => undefined))?.size ?? 0;
    const from = this.#offsets[stream];
    if (size <= from) return;
    const takers = this.#takers(stream, size - from);
    if (takers.length > 0) {
      // At most MAX_PUMP_BYTES per tick (`yes` writes gigabytes a second): followers get the newest, and a gap notice.
      const skipped = Math.max(0, size - from - MAX_PUMP_BYTES);
      if (skipped > 0) for (const l of takers) l.skipped?.(stream, skipped, "too-fast");
      const fh = await fsp.open(this.#files.live(stream), "r");
      try {
        const buf = Buffer.allocUnsafe(size - from - skipped);
        const got = await readFully(fh, buf, from + skipped);
        this.#emit(takers, stream, buf.subarray(0, got));
      } finally {
        await fh.close();
      }
    }
    this.#grown += size - from;
    this.#offsets[stream] = size;
  }

  async #capAll(): Promise<void> {
    let changed = false;
    for (const s of STREAMS) {
      const cap = this.#options.capBytes;
      const result = await capLog(this.#files.live(s), this.#files.old(s), cap, Math.max(1, Math.floor(cap / 2)));
      if (!result) continue;
      // Bytes appended after the last pump are now at the end of the old file.
      const missing = result.cutAt - this.#offsets[s];
      const takers = missing > 0 ? this.#takers(s, missing) : [];
      if (missing > MAX_PUMP_BYTES) for (const l of takers) l.skipped?.(s, missing - MAX_PUMP_BYTES, "too-fast");
      if (takers.length > 0) this.#emit(takers, s, (await readLast(this.#files.old(s), Math.min(missing, MAX_PUMP_BYTES))).data);
      this.#offsets[s] = 0;
      this.#dropped[s] += result.dropped;
      changed = true;
    }
    if (changed) this.#options.onDropped({ ...this.#dropped });
  }

  /** The listeners ready for `bytes` more of a stream; the others are told they skip them. */
  #takers(stream: StreamName, bytes: number): OutputListener[] {
    const takers: OutputListener[] = [];
    for (const l of this.#listeners) {
      if (l.ready?.() === false) l.skipped?.(stream, bytes, "not-ready");
      else takers.push(l);
    }
    return takers;
  }

  #emit(takers: OutputListener[], stream: StreamName, data: Buffer): void {
    if (data.length === 0) return;
    for (const l of takers) l.chunk(stream, data);
  }
}
