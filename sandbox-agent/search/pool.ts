import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { errors } from "../../src/errors.js";
import type { Logger } from "../../src/logging.js";
import type { ShareAnswer, SharedWalk } from "./answer.js";
import type { SearchJob } from "./jobs.js";

/** A search that has not answered this long after its deadline is stuck (a hung mount, a runaway regex): its worker is terminated. */
const STUCK_GRACE_MS = 5_000;
/** Idle workers are ended after this, so an idle agent holds no extra thread. */
const IDLE_MS = 30_000;

/**
 * The worker script beside this module; when running from the TypeScript
 * sources (tests), the compiled one in dist/ (npm test builds it first).
 */
function workerUrl(): URL {
  const here = new URL("./worker.js", import.meta.url);
  if (!import.meta.url.endsWith(".ts")) return here;
  const built = new URL("../../dist/sandbox-agent/search/worker.js", import.meta.url);
  if (!existsSync(fileURLToPath(built))) throw new Error(`${fileURLToPath(built)} is missing: run npm run build first`);
  return built;
}

interface Pending {
  resolve: (answers: ShareAnswer[]) => void;
  reject: (err: unknown) => void;
}

class SearchWorker {
  readonly worker: Worker;
  readonly pending = new Map<number, Pending>();
  idleTimer?: NodeJS.Timeout;

  constructor(onExit: (w: SearchWorker) => void) {
    this.worker = new Worker(workerUrl());
    this.worker.unref();
    this.worker.on("message", (msg: { id: number; answers?: ShareAnswer[]; error?: string }) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error !== undefined) p.reject(errors.internal(`search failed: ${msg.error}`));
      else p.resolve(msg.answers!);
    });
    const fail = (err: unknown) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      onExit(this);
    };
    this.worker.on("error", (err) => fail(errors.internal(`search worker failed: ${err.message}`)));
    this.worker.on("exit", () => fail(errors.unprocessable("the search did not finish within its time limit and was stopped")));
  }
}

/**
 * Runs find, fuzzy search and content search on a small pool of worker
 * threads (one per core, at most 2), one search per worker at a time, the
 * rest queued. Each search has a deadline after which it returns what it has
 * (`truncated: true`); a client that goes away cancels its search.
 */
export class SearchPool {
  readonly #size: number;
  readonly #idle: SearchWorker[] = [];
  readonly #busy = new Set<SearchWorker>();
  readonly #queue: (() => void)[] = [];
  readonly #logger: Logger;
  #nextId = 1;
  #closed = false;

  /** How many searches run at once (one per worker). */
  get size(): number {
    return this.#size;
  }

  constructor(options: { size: number; logger: Logger }) {
    this.#size = Math.max(1, options.size);
    this.#logger = options.logger;
  }

  /** Searches that could start at once (idle workers, and workers not yet started). */
  get free(): number {
    return this.#size - this.#busy.size;
  }

  /** Runs a search (or this worker's part of a shared walk); resolves with its answers, the matches as JSON text. */
  async run(job: SearchJob, signal: AbortSignal, walk?: SharedWalk): Promise<ShareAnswer[]> {
    if (this.#closed) throw errors.serviceUnavailable("the agent is shutting down");
    const worker = await this.#acquire();
    const cancel = new SharedArrayBuffer(4);
    const flag = new Int32Array(cancel);
    const onAbort = () => Atomics.store(flag, 0, 1);
    signal.addEventListener("abort", onAbort, { once: true });
    const id = this.#nextId++;
    const stuck = setTimeout(
      () => {
        this.#logger.warn({ kind: job.kind }, "search did not stop at its deadline: terminating its worker");
        void worker.worker.terminate();
      },
      Math.max(0, job.deadline - Date.now()) + STUCK_GRACE_MS,
    );
    try {
      return await new Promise<ShareAnswer[]>((resolve, reject) => {
        worker.pending.set(id, { resolve, reject });
        worker.worker.postMessage({ id, job, walk, cancel });
      });
    } finally {
      clearTimeout(stuck);
      signal.removeEventListener("abort", onAbort);
      this.#release(worker);
    }
  }

  #acquire(): Promise<SearchWorker> {
    const idle = this.#idle.pop();
    if (idle) {
      clearTimeout(idle.idleTimer);
      this.#busy.add(idle);
      return Promise.resolve(idle);
    }
    if (this.#busy.size < this.#size) {
      const worker = new SearchWorker((w) => this.#forget(w));
      this.#busy.add(worker);
      return Promise.resolve(worker);
    }
    return new Promise((resolve) => this.#queue.push(() => resolve(this.#acquire())));
  }

  #release(worker: SearchWorker): void {
    if (!this.#busy.delete(worker)) return; // it exited
    if (this.#closed) {
      void worker.worker.terminate();
      return;
    }
    this.#idle.push(worker);
    worker.idleTimer = setTimeout(() => {
      const i = this.#idle.indexOf(worker);
      if (i >= 0) this.#idle.splice(i, 1);
      void worker.worker.terminate();
    }, IDLE_MS);
    worker.idleTimer.unref();
    this.#queue.shift()?.();
  }

  #forget(worker: SearchWorker): void {
    this.#busy.delete(worker);
    const i = this.#idle.indexOf(worker);
    if (i >= 0) this.#idle.splice(i, 1);
    clearTimeout(worker.idleTimer);
    this.#queue.shift()?.();
  }

  /** Ends every worker; searches still running fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#idle, ...this.#busy];
    this.#idle.length = 0;
    await Promise.all(all.map((w) => w.worker.terminate()));
  }
}
