import { errors } from "../../src/errors.js";
import { migrate, type Db } from "../../src/sqlite.js";
import { DAY_MS } from "./buckets.js";
import { DailySums, ID_SPACE } from "./daily-sums.js";
import { RowWriter } from "./row-writer.js";
import { MAX_EVENT_COST_NANOS, MAX_TS, METRICS_MIGRATIONS, NANOS_PER_USD, type UsageEvent, type UsageFields } from "./usage-schema.js";
import { BILLING_DIMENSIONS, DIMENSION_BY_NAME, RESOURCE_TYPES, resourceTypeId } from "./dimensions.js";

/** The usage records, their cost and the schema (usage-schema.ts), importable from here as before. */
export { METRICS_MIGRATIONS, NANOS_PER_USD, type UsageEvent, type UsageFields } from "./usage-schema.js";

interface Resource {
  id: number;
  rnId: number;
  wsId: number;
  typeId: number;
  workspace: string;
  type: string;
  name: string;
}

export class UsageStore {
  readonly db: Db;
  #workspaces = new Map<string, number>();
  #names = new Map<string, number>();
  #resources = new Map<string, Resource>();
  #prices = new Map<number, number>();
  readonly #stmt;

  constructor(db: Db) {
    this.db = db;
    migrate(db, METRICS_MIGRATIONS);
    const seedType = db.prepare("INSERT OR IGNORE INTO metrics_resource_types (id, name) VALUES (?, ?)");
    const seedDim = db.prepare("INSERT OR IGNORE INTO metrics_billing_dimensions (id, name, type_id, unit) VALUES (?, ?, ?, ?)");
    db.transaction(() => {
      RESOURCE_TYPES.forEach((t) => seedType.run(resourceTypeId(t), t));
      for (const d of BILLING_DIMENSIONS) seedDim.run(d.id, d.name, resourceTypeId(d.resourceType), d.unit);
    })();
    this.#stmt = {
      insertWorkspace: db.prepare("INSERT INTO metrics_workspaces (name) VALUES (?)"),
      insertName: db.prepare("INSERT INTO metrics_resource_names (ws_id, type_id, name) VALUES (?, ?, ?)"),
      insertResource: db.prepare("INSERT INTO metrics_resources (uuid, rn_id) VALUES (?, ?)"),
      events: new RowWriter(db, "INSERT INTO metrics_usage_events (ts, ws_id, type_id, rn_id, res_id, dim_id, usage, cost_nanos) VALUES", 8),
      dailyResource: new RowWriter(
        db,
        "INSERT INTO metrics_daily_resource (day, res_id, dim_id, ws_id, type_id, rn_id, usage, cost_nanos) VALUES",
        8,
        "ON CONFLICT (day, res_id, dim_id) DO UPDATE SET usage = usage + excluded.usage, cost_nanos = cost_nanos + excluded.cost_nanos",
      ),
      dailyWorkspace: new RowWriter(
        db,
        "INSERT INTO metrics_daily_workspace (day, ws_id, dim_id, type_id, usage, cost_nanos) VALUES",
        6,
        "ON CONFLICT (day, ws_id, dim_id) DO UPDATE SET usage = usage + excluded.usage, cost_nanos = cost_nanos + excluded.cost_nanos",
      ),
      upsertPrice: db.prepare(
        "INSERT INTO metrics_price_overrides (dim_id, usd_per_unit) VALUES (?, ?) ON CONFLICT (dim_id) DO UPDATE SET usd_per_unit = excluded.usd_per_unit",
      ),
      deletePrice: db.prepare("DELETE FROM metrics_price_overrides WHERE dim_id = ?"),
    };
    this.#loadCaches();
  }

  /**
   * Records a batch in one transaction: all or nothing. Identity conflicts (a
   * resourceUuid already seen with another workspace, type or name) and a
   * billing dimension that does not belong to the resource type are 400s
   * naming the event (`${label}[i]`), checked before anything is written.
   */
  record(events: readonly UsageEvent[], label = "events"): number {
    return this.recordAt(
      events,
      Float64Array.from(events, (e) => e.ts),
      label,
    );
  }

  /**
   * `record` with the times apart (`ts[i]` is the time of `events[i]`): the
   * bulk hook validates the parsed JSON objects in place instead of copying
   * a million of them. `usage[i]`, when given, is the usage of `events[i]`
   * (the hook's sliced reader shares one fields object between events).
   */
  recordAt(events: readonly UsageFields[], ts: Float64Array, label = "events", usage: Float64Array = Float64Array.from(events, (e) => e.usage)): number {
    const n = events.length;
    const dimIds = new Uint8Array(n);
    const costs = new Float64Array(n);
    // The resource each event resolved to, so the write does not look its uuid up again.
    const refs = new Array<Resource | undefined>(n);
    const pending = new Map<string, { e: UsageFields; index: number }>();
    for (let i = 0; i < n; i++) {
      const e = events[i]!;
      const dim = DIMENSION_BY_NAME.get(e.billingDimension);
      if (!dim) throw errors.badRequest(`${label}[${i}].billingDimension: unknown billing dimension "${e.billingDimension}"`);
      if (dim.resourceType !== e.resourceType) {
        throw errors.badRequest(`${label}[${i}].billingDimension: ${dim.name} belongs to resource type ${dim.resourceType}, not ${e.resourceType}`);
      }
      dimIds[i] = dim.id;
      // The hook has checked these already; the simulator's own calls have not.
      if (!(ts[i]! >= 0 && ts[i]! <= MAX_TS)) throw errors.badRequest(`${label}[${i}].timestamp: out of range`);
      const u = usage[i]!;
      if (!(u >= 0 && u < Infinity)) throw errors.badRequest(`${label}[${i}].usage: expected a finite number >= 0`);
      const cost = Math.round(u * this.#prices.get(dim.id)! * NANOS_PER_USD);
      if (!(cost <= MAX_EVENT_COST_NANOS)) throw errors.badRequest(`${label}[${i}].usage: one event may cost at most 1000000 USD`);
      costs[i] = cost;
      const known = this.#resources.get(e.resourceUuid);
      if (known) {
        if (known.workspace !== e.workspace || known.type !== e.resourceType || known.name !== e.resourceName) {
          throw errors.badRequest(`${label}[${i}].resourceUuid: ${e.resourceUuid} is already recorded for another workspace, type or name`);
        }
        refs[i] = known;
        continue;
      }
      const seen = pending.get(e.resourceUuid);
      if (!seen) pending.set(e.resourceUuid, { e, index: i });
      else if (seen.e.workspace !== e.workspace || seen.e.resourceType !== e.resourceType || seen.e.resourceName !== e.resourceName) {
        throw errors.badRequest(`${label}[${i}].resourceUuid: ${e.resourceUuid} appears with another workspace, type or name at ${label}[${seen.index}]`);
      }
    }
    try {
      this.db.transaction(() => this.#write(events, ts, usage, dimIds, costs, refs))();
    } catch (err) {
      for (const w of [this.#stmt.events, this.#stmt.dailyResource, this.#stmt.dailyWorkspace]) w.reset();
      this.#loadCaches(); // interned rows of the failed batch were rolled back
      throw err;
    }
    return n;
  }

  #write(
    events: readonly UsageFields[],
    ts: Float64Array,
    usage: Float64Array,
    dimIds: Uint8Array,
    costs: Float64Array,
    refs: Array<Resource | undefined>,
  ): void {
    const s = this.#stmt;
    const sums = new DailySums();
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      const r = refs[i] ?? this.#resources.get(e.resourceUuid) ?? this.#intern(e);
      const dimId = dimIds[i]!;
      const cost = costs[i]!;
      const t = ts[i]!;
      const u = usage[i]!;
      s.events.add(t, r.wsId, r.typeId, r.rnId, r.id, dimId, u, cost);
      sums.add(Math.floor(t / DAY_MS), r, dimId, u, cost);
    }
    s.events.flush();
    for (const day of sums.days.values()) {
      for (const a of day.byResource.values()) s.dailyResource.add(a.day, a.r.id, a.dimId, a.r.wsId, a.r.typeId, a.r.rnId, a.usage, a.cost);
      for (const a of day.byWorkspace.values()) s.dailyWorkspace.add(a.day, a.r.wsId, a.dimId, a.r.typeId, a.usage, a.cost);
    }
    s.dailyResource.flush();
    s.dailyWorkspace.flush();
  }

  #intern(e: UsageFields): Resource {
    const typeId = resourceTypeId(e.resourceType);
    let wsId = this.#workspaces.get(e.workspace);
    if (wsId === undefined) {
      wsId = Number(this.#stmt.insertWorkspace.run(e.workspace).lastInsertRowid);
      this.#workspaces.set(e.workspace, wsId);
    }
    const nameKey = `${wsId}:${typeId}:${e.resourceName}`;
    let rnId = this.#names.get(nameKey);
    if (rnId === undefined) {
      rnId = Number(this.#stmt.insertName.run(wsId, typeId, e.resourceName).lastInsertRowid);
      this.#names.set(nameKey, rnId);
    }
    const id = Number(this.#stmt.insertResource.run(e.resourceUuid, rnId).lastInsertRowid);
    if (id >= ID_SPACE || wsId >= ID_SPACE) throw errors.insufficientStorage("usage store: too many resources");
    const r: Resource = { id, rnId, wsId, typeId, workspace: e.workspace, type: e.resourceType, name: e.resourceName };
    this.#resources.set(e.resourceUuid, r);
    return r;
  }

  /** Forgets all usage, resources and price overrides (the simulator's POST /_sim/reset). */
  clear(): void {
    this.db.transaction(() => {
      for (const t of ["usage_events", "daily_resource", "daily_workspace", "resources", "resource_names", "workspaces", "price_overrides"])
        this.db.exec(`DELETE FROM metrics_${t}`);
    })();
    this.#loadCaches();
  }

  /** Workspace names → ids, for the ones that have usage (others simply match nothing). */
  workspaceIds(names: readonly string[]): number[] {
    return names.map((n) => this.#workspaces.get(n)).filter((id): id is number => id !== undefined);
  }

  /** Effective price table, USD per unit, with the default beside each. */
  prices(): Record<string, { usdPerUnit: number; defaultUsdPerUnit: number; unit: string; overridden: boolean }> {
    return Object.fromEntries(
      BILLING_DIMENSIONS.map((d) => {
        const usd = this.#prices.get(d.id)!;
        return [d.name, { usdPerUnit: usd, defaultUsdPerUnit: d.defaultUsdPerUnit, unit: d.unit, overridden: usd !== d.defaultUsdPerUnit }];
      }),
    );
  }

  /**
   * Overrides prices (null restores the default). Prices apply to usage
   * recorded afterwards: like a real bill, past usage keeps the price it was
   * recorded at.
   */
  setPrices(overrides: Record<string, number | null>, label = "body"): void {
    const entries = Object.entries(overrides).map(([name, usd]) => {
      const dim = DIMENSION_BY_NAME.get(name);
      if (!dim) throw errors.badRequest(`${label}.${name}: unknown billing dimension`);
      if (usd !== null && !(Number.isFinite(usd) && usd >= 0)) throw errors.badRequest(`${label}.${name}: expected a price >= 0 or null`);
      return [dim.id, usd] as const;
    });
    this.db.transaction(() => {
      for (const [id, usd] of entries) {
        if (usd === null) this.#stmt.deletePrice.run(id);
        else this.#stmt.upsertPrice.run(id, usd);
      }
    })();
    this.#loadPrices();
  }

  #loadCaches(): void {
    this.#workspaces = new Map((this.db.prepare("SELECT name, id FROM metrics_workspaces").all() as { name: string; id: number }[]).map((r) => [r.name, r.id]));
    const names = this.db.prepare("SELECT id, ws_id, type_id, name FROM metrics_resource_names").all() as {
      id: number;
      ws_id: number;
      type_id: number;
      name: string;
    }[];
    this.#names = new Map(names.map((r) => [`${r.ws_id}:${r.type_id}:${r.name}`, r.id]));
    const byId = new Map(names.map((r) => [r.id, r]));
    const wsNames = new Map([...this.#workspaces].map(([name, id]) => [id, name]));
    const resources = this.db.prepare("SELECT id, uuid, rn_id FROM metrics_resources").all() as { id: number; uuid: string; rn_id: number }[];
    this.#resources = new Map(
      resources.map((r) => {
        const n = byId.get(r.rn_id)!;
        const resource: Resource = {
          id: r.id,
          rnId: r.rn_id,
          wsId: n.ws_id,
          typeId: n.type_id,
          workspace: wsNames.get(n.ws_id)!,
          type: RESOURCE_TYPES[n.type_id - 1]!,
          name: n.name,
        };
        return [r.uuid, resource];
      }),
    );
    this.#loadPrices();
  }

  #loadPrices(): void {
    const overrides = new Map(
      (this.db.prepare("SELECT dim_id, usd_per_unit FROM metrics_price_overrides").all() as { dim_id: number; usd_per_unit: number }[]).map((r) => [
        r.dim_id,
        r.usd_per_unit,
      ]),
    );
    this.#prices = new Map(BILLING_DIMENSIONS.map((d) => [d.id, overrides.get(d.id) ?? d.defaultUsdPerUnit]));
  }
}
