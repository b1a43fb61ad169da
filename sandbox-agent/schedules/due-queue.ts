/**
 * A min-heap of (due time, schedule id): the scheduler's single timer wheel.
 * Only the earliest entry is ever armed as a timer, so 10,000 schedules cost
 * one timer, not 10,000. Rescheduling or removing an id leaves its old heap
 * entry behind; stale entries are recognised on pop (lazy deletion) and the
 * heap is rebuilt when they outnumber live ones.
 */
interface Entry {
  at: number;
  id: string;
}

export class DueQueue {
  #heap: Entry[] = [];
  #due = new Map<string, number>();

  get size(): number {
    return this.#due.size;
  }

  /** Sets (or clears, with null) the due time of `id`. */
  set(id: string, at: number | null): void {
    if (at === null) {
      this.#due.delete(id);
      return;
    }
    if (this.#due.get(id) === at) return;
    this.#due.set(id, at);
    this.#push({ at, id });
    if (this.#heap.length > 2 * this.#due.size + 1024) this.#rebuild();
  }

  get(id: string): number | undefined {
    return this.#due.get(id);
  }

  /** The earliest due time, or undefined when empty. */
  peek(): number | undefined {
    this.#dropStale();
    return this.#heap[0]?.at;
  }

  /** Removes and returns every id due at or before `now`, earliest first. */
  popDue(now: number): { id: string; at: number }[] {
    const out: { id: string; at: number }[] = [];
    for (;;) {
      this.#dropStale();
      const top = this.#heap[0];
      if (!top || top.at > now) break;
      this.#pop();
      this.#due.delete(top.id);
      out.push(top);
    }
    return out;
  }

  #dropStale(): void {
    while (this.#heap.length > 0) {
      const top = this.#heap[0]!;
      if (this.#due.get(top.id) === top.at) return;
      this.#pop();
    }
  }

  #rebuild(): void {
    this.#heap = [];
    for (const [id, at] of this.#due) this.#push({ id, at });
  }

  #push(entry: Entry): void {
    const h = this.#heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.at <= entry.at) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = entry;
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const c = r < h.length && h[r]!.at < h[l]!.at ? r : l;
      if (h[c]!.at >= last.at) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
  }
}
