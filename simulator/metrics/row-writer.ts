import type { Statement } from "better-sqlite3";
import type { Db } from "../../src/sqlite.js";

/**
 * Buffers rows and inserts them `ROWS` at a time with one multi-row
 * statement: better-sqlite3 pays a native call per `run`, which is most of
 * the cost of a narrow row (measured: ~2 µs per single-row insert, ~0.8 µs
 * per row at 64 rows a statement). Call `flush()` before the transaction ends.
 */
const ROWS = 64;

export class RowWriter {
  readonly #columns: number;
  readonly #many: Statement;
  readonly #one: Statement;
  readonly #args: unknown[];
  readonly #single: unknown[];
  #filled = 0;

  /** `head` is `INSERT INTO t (a, b, ...) VALUES`; `tail` e.g. an ON CONFLICT clause. */
  constructor(db: Db, head: string, columns: number, tail = "") {
    const tuple = `(${new Array(columns).fill("?").join(", ")})`;
    this.#columns = columns;
    this.#many = db.prepare(`${head} ${new Array(ROWS).fill(tuple).join(", ")} ${tail}`);
    this.#one = db.prepare(`${head} ${tuple} ${tail}`);
    this.#args = new Array(columns * ROWS);
    this.#single = new Array(columns);
  }

  add(a: unknown, b: unknown, c: unknown, d: unknown, e?: unknown, f?: unknown, g?: unknown, h?: unknown): void {
    const args = this.#args;
    let o = this.#filled * this.#columns;
    const n = this.#columns;
    args[o++] = a;
    args[o++] = b;
    args[o++] = c;
    args[o++] = d;
    if (n > 4) args[o++] = e;
    if (n > 5) args[o++] = f;
    if (n > 6) args[o++] = g;
    if (n > 7) args[o++] = h;
    if (++this.#filled === ROWS) {
      this.#many.run(args);
      this.#filled = 0;
    }
  }

  flush(): void {
    for (let r = 0; r < this.#filled; r++) {
      for (let c = 0; c < this.#columns; c++) this.#single[c] = this.#args[r * this.#columns + c];
      this.#one.run(this.#single);
    }
    this.#filled = 0;
  }

  /** Forgets buffered rows (after a failed transaction). */
  reset(): void {
    this.#filled = 0;
  }
}
