import type { Statement } from "better-sqlite3";
import type { Clock } from "../../src/clock.js";
import { isResourceType } from "./dimensions.js";
import { recordSpan, type ResourceRef } from "./record.js";
import type { UsageStore } from "./usage-store.js";

interface OpenSpan {
  resource: ResourceRef;
  billingDimension: string;
  gb?: number;
  from: number;
}

interface SpanRow {
  uuid: string;
  dimension: string;
  workspace: string;
  resource_type: string;
  resource_name: string;
  gb: number | null;
  from_ms: number;
}

const keyOf = (uuid: string, dimension: string) => `${uuid}\u0000${dimension}`;

/**
 * Open usage spans of live resources (a running sandbox, a stored image, a
 * verified domain): `start` when it begins, `stop` when it ends, `flush`
 * records everything open up to now without closing it. The metrics router
 * flushes before answering, so running resources show up to the second
 * without a timer.
 *
 * Open spans are also written to `metrics_open_spans` (same database as the
 * events): a simulator restarted on its --data file reloads them and carries
 * on, so a restart loses no usage. A span may start in the future (a
 * deployment due to reach DEPLOYED in 1.5 s): nothing accrues before then.
 */
export class UsageMeter {
  readonly #store: UsageStore;
  readonly #clock: Clock;
  readonly #open = new Map<string, OpenSpan>();
  readonly #settlers: Array<(now: number) => void> = [];
  readonly #put: Statement;
  readonly #remove: Statement;
  readonly #advance: Statement;

  constructor(store: UsageStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
    const db = store.db;
    this.#put = db.prepare(
      "INSERT OR REPLACE INTO metrics_open_spans (uuid, dimension, workspace, resource_type, resource_name, gb, from_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    this.#remove = db.prepare("DELETE FROM metrics_open_spans WHERE uuid = ? AND dimension = ?");
    this.#advance = db.prepare("UPDATE metrics_open_spans SET from_ms = ? WHERE from_ms < ?");
    for (const row of db.prepare("SELECT * FROM metrics_open_spans").all() as SpanRow[]) {
      if (!isResourceType(row.resource_type)) continue;
      const resource: ResourceRef = { workspace: row.workspace, resourceType: row.resource_type, resourceName: row.resource_name, resourceUuid: row.uuid };
      this.#open.set(keyOf(row.uuid, row.dimension), { resource, billingDimension: row.dimension, gb: row.gb ?? undefined, from: row.from_ms });
    }
  }

  /**
   * Opens (or re-opens with a new size: memory changed) the span of
   * `resource` on `billingDimension`. `at` (ms, default now) lets a status
   * move that is settled late (on the next read) start at its due time.
   */
  start(resource: ResourceRef, billingDimension: string, gb?: number, at = this.#clock.now()): void {
    const key = keyOf(resource.resourceUuid, billingDimension);
    this.#close(key, at);
    this.#open.set(key, { resource, billingDimension, gb, from: at });
    this.#put.run(resource.resourceUuid, billingDimension, resource.workspace, resource.resourceType, resource.resourceName, gb ?? null, at);
  }

  /**
   * The desired state after a change of a live resource: keeps a span that
   * is already running at the same size (a redeploy does not interrupt it),
   * replaces one that has not started yet (a new plan), else starts at `at`.
   */
  run(resource: ResourceRef, billingDimension: string, gb: number | undefined, at: number): void {
    const key = keyOf(resource.resourceUuid, billingDimension);
    const span = this.#open.get(key);
    const now = this.#clock.now();
    if (span && span.from <= now) {
      if (span.gb === gb) return;
      at = now; // resized: the old size up to now, the new one from now
    } else if (span) {
      if (span.from === at && span.gb === gb) return; // the same plan, read again
      this.#drop(key);
    }
    this.start(resource, billingDimension, gb, at);
  }

  /** Closes the spans of a resource at `at` (default now): one dimension, or all of them (deleted). */
  stop(resourceUuid: string, billingDimension?: string, at = this.#clock.now()): void {
    for (const key of [...this.#open.keys()]) {
      const [uuid, dim] = key.split("\u0000");
      if (uuid === resourceUuid && (billingDimension === undefined || dim === billingDimension)) this.#close(key, at);
    }
  }

  /** Closes every span of a workspace's resources at `at` (the workspace was deleted). */
  stopWorkspace(workspace: string, at = this.#clock.now()): void {
    for (const [key, span] of [...this.#open]) if (span.resource.workspace === workspace) this.#close(key, at);
  }

  /** Whether a span is open (running or due to start) for this resource and dimension. */
  isOpen(resourceUuid: string, billingDimension: string): boolean {
    return this.#open.has(keyOf(resourceUuid, billingDimension));
  }

  /**
   * Work to do before each flush: usage whose end is computed lazily (a job
   * execution finishes on the clock, nobody reading it) is settled here, so a
   * metrics query never misses it.
   */
  beforeFlush(settle: (now: number) => void): void {
    this.#settlers.push(settle);
  }

  /** Records every open span up to now; they stay open from now on. */
  flush(): void {
    const now = this.#clock.now();
    for (const settle of this.#settlers) settle(now);
    this.#store.db.transaction(() => {
      for (const span of this.#open.values()) {
        if (now <= span.from) continue;
        recordSpan(this.#store, span.resource, span.billingDimension, { from: span.from, to: now, gb: span.gb });
        span.from = now;
      }
      this.#advance.run(now, now);
    })();
  }

  /** Drops open spans without recording them (the simulator's reset). */
  clear(): void {
    this.#open.clear();
    this.#store.db.exec("DELETE FROM metrics_open_spans");
  }

  get openSpans(): number {
    return this.#open.size;
  }

  #drop(key: string): void {
    const span = this.#open.get(key);
    if (!span) return;
    this.#open.delete(key);
    this.#remove.run(span.resource.resourceUuid, span.billingDimension);
  }

  #close(key: string, at: number): void {
    const span = this.#open.get(key);
    if (!span) return;
    this.#drop(key);
    if (at > span.from) recordSpan(this.#store, span.resource, span.billingDimension, { from: span.from, to: at, gb: span.gb });
  }
}
