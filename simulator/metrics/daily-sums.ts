import { DAY_MS } from "./buckets.js";

/** The ids of the resource an event belongs to. */
export interface SumTarget {
  id: number;
  wsId: number;
  typeId: number;
  rnId: number;
}

/** A rollup row being summed in JS before its one upsert per batch. */
export interface Sum {
  day: number;
  r: SumTarget;
  dimId: number;
  usage: number;
  cost: number;
}

// Rollup sums are kept per day, keyed by a small integer (dimension in the
// high bits, resource or workspace id < 2^26 in the low ones): no string per
// event, and V8's fast small-integer Map keys.
export const ID_SPACE = 2 ** 26;
const sumKey = (dimId: number, id: number) => dimId * ID_SPACE + id;

export class DailySums {
  readonly days = new Map<number, { byResource: Map<number, Sum>; byWorkspace: Map<number, Sum> }>();
  #lastIndex = NaN;
  #last?: { byResource: Map<number, Sum>; byWorkspace: Map<number, Sum> };

  add(dayIndex: number, r: SumTarget, dimId: number, usage: number, cost: number): void {
    let day = this.#last;
    if (dayIndex !== this.#lastIndex || !day) {
      day = this.days.get(dayIndex);
      if (!day) this.days.set(dayIndex, (day = { byResource: new Map(), byWorkspace: new Map() }));
      this.#lastIndex = dayIndex;
      this.#last = day;
    }
    const rk = sumKey(dimId, r.id);
    const ra = day.byResource.get(rk);
    if (ra) {
      ra.usage += usage;
      ra.cost += cost;
    } else day.byResource.set(rk, { day: dayIndex * DAY_MS, r, dimId, usage, cost });
    const wk = sumKey(dimId, r.wsId);
    const wa = day.byWorkspace.get(wk);
    if (wa) {
      wa.usage += usage;
      wa.cost += cost;
    } else day.byWorkspace.set(wk, { day: dayIndex * DAY_MS, r, dimId, usage, cost });
  }
}
