import type { Statement } from "better-sqlite3";
import { bucketSql, bucketStarts, DAY_MS } from "./buckets.js";
import { DIMENSION_BY_NAME, resourceTypeId, type GroupByDimension } from "./dimensions.js";
import type { MetricsQuery } from "./params.js";
import { NANOS_PER_USD, type UsageStore } from "./usage-store.js";

/**
 * Runs a metrics query as two SQL aggregations: the first sums the window per
 * group, names the groups, pages them (keyset on the names) and totals them;
 * the second sums the page's groups per (group, bucket). Summing buckets for
 * one page rather than for every group keeps a page cheap when there are
 * thousands of groups (resource_uuid). JS only lays the sums onto the
 * zero-filled bucket list.
 *
 * Source rows: whole days come from a daily rollup (per workspace, or per
 * resource when the query needs resource names or uuids), the partial days at
 * either edge and hourly windows come from the raw events. Buckets of every
 * resolution but hourly are unions of whole UTC days, so a rollup row falls in
 * the same bucket as the events it sums.
 */

/** Columns an entry carries, in canonical order, with the id column and name lookup behind each. */
const FIELDS = [
  { field: "workspace", id: "ws_id", name: "(SELECT name FROM metrics_workspaces WHERE id = g.ws_id)" },
  { field: "resourceType", id: "type_id", name: "(SELECT name FROM metrics_resource_types WHERE id = g.type_id)" },
  { field: "resourceName", id: "rn_id", name: "(SELECT name FROM metrics_resource_names WHERE id = g.rn_id)" },
  { field: "resourceUuid", id: "res_id", name: "(SELECT uuid FROM metrics_resources WHERE id = g.res_id)" },
  { field: "billingDimension", id: "dim_id", name: "(SELECT name FROM metrics_billing_dimensions WHERE id = g.dim_id)" },
] as const;
type Field = (typeof FIELDS)[number]["field"];

/**
 * The id columns a grouping needs, closed under enrichment (reference §3.15):
 * resource_uuid also fills workspace, resourceName, resourceType;
 * resource_name fills workspace, resourceType; billing_dimension fills
 * resourceType. The added columns are functions of the grouped ones, so they
 * never split a group.
 */
const CLOSURE: Record<GroupByDimension, Field[]> = {
  workspace: ["workspace"],
  resource_type: ["resourceType"],
  resource_name: ["resourceName", "workspace", "resourceType"],
  resource_uuid: ["resourceUuid", "resourceName", "workspace", "resourceType"],
  billing_dimension: ["billingDimension", "resourceType"],
};

export interface Scope {
  /** Workspaces the caller may see (already narrowed by the `workspace` filter). */
  workspaces: readonly string[];
}

export interface TimeseriesPoint {
  timestamp: string;
  cost: number;
  usage?: number;
}
export interface MetricsEntry {
  workspace?: string;
  resourceType?: string;
  resourceName?: string;
  resourceUuid?: string;
  billingDimension?: string;
  summary: { cost: number; usage?: number };
  timeseries: TimeseriesPoint[];
}
export interface MetricsPage {
  entries: MetricsEntry[];
  /** Sort key of the page's last group, when more follow. */
  nextPosition?: string[];
  totalGroups: number;
  totalCostNanos: number;
  totalUsage: number;
}

type Row = Record<string, number | string | null>;

export const usd = (nanos: number): number => nanos / NANOS_PER_USD;
/** Usage is a float sum; six decimals are more than any unit needs. */
const roundUsage = (u: number): number => Math.round(u * 1e6) / 1e6;

export class MetricsQueries {
  readonly #store: UsageStore;
  readonly #cache = new Map<string, Statement>();

  constructor(store: UsageStore) {
    this.#store = store;
  }

  run(q: MetricsQuery, scope: Scope, position: string[] | undefined): MetricsPage {
    const fields = FIELDS.filter((f) => q.groupBy.some((g) => CLOSURE[g].includes(f.field)));
    const ids = fields.map((f) => f.id);
    const keys = fields.map((_, i) => `k${i}`);
    const params = this.#sourceParams(q, scope);
    const cursorParams = Object.fromEntries(keys.map((k, i) => [`c_${k}`, position?.[i] ?? ""]));
    const groups = this.#statement(this.#groupsSql(q, ids, keys, position !== undefined)).all({ ...params, ...cursorParams, limit: q.limit + 1 }) as Row[];
    const hasMore = groups.length > q.limit;
    const page = hasMore ? groups.slice(0, q.limit) : groups;

    const buckets = bucketStarts(q.start, q.end, q.resolution);
    const index = new Map(buckets.map((b, i) => [b, i]));
    const stamps = buckets.map((b) => new Date(b).toISOString());
    const withUsage = q.groupBy.includes("billing_dimension");
    const idKey = (row: Row) => ids.map((c) => row[c]).join(":");
    const byIds = new Map<string, MetricsEntry>();
    const entries = page.map((row) => {
      const entry: MetricsEntry = { summary: { cost: usd(row.g_cost as number) }, timeseries: [] };
      fields.forEach((f, i) => (entry[f.field] = row[keys[i]!] as string));
      if (withUsage) entry.summary.usage = roundUsage(row.g_usage as number);
      entry.timeseries = stamps.map((timestamp) => (withUsage ? { timestamp, cost: 0, usage: 0 } : { timestamp, cost: 0 }));
      byIds.set(idKey(row), entry);
      return entry;
    });
    if (page.length) {
      // The buckets of this page's groups only: the window's rows are read again, but only these groups are summed.
      const pageIds = JSON.stringify(page.map((row) => ids.map((c) => row[c])));
      for (const row of this.#statement(this.#bucketsSql(q, ids)).all({ ...params, page: pageIds }) as Row[]) {
        const point = byIds.get(idKey(row))!.timeseries[index.get(row.bucket as number)!]!;
        point.cost = usd(row.b_cost as number);
        if (withUsage) point.usage = roundUsage(row.b_usage as number);
      }
    }
    const first = groups[0];
    const totals = first ? { groups: first.total_groups, cost: first.total_cost, usage: first.total_usage } : this.#totals(q, scope, ids);
    return {
      entries,
      nextPosition: hasMore ? keys.map((k) => page[q.limit - 1]![k] as string) : undefined,
      totalGroups: Number(totals.groups ?? 0),
      totalCostNanos: Number(totals.cost ?? 0),
      totalUsage: Number(totals.usage ?? 0),
    };
  }

  /** Distinct resource types with at least one event in the window, among the caller's workspaces. */
  resourceTypes(window: { start: number; end: number }, scope: Scope): string[] {
    const q = { ...window, resolution: "daily", groupBy: [], limit: 1 } as MetricsQuery;
    const sql = `WITH src AS (${this.#source(q)}) SELECT DISTINCT t.name FROM src JOIN metrics_resource_types t ON t.id = src.type_id ORDER BY t.id`;
    return (this.#statement(sql).pluck().all(this.#sourceParams(q, scope)) as string[]).slice();
  }

  /** Totals when the page is empty (no data, or a cursor past the end): they still describe the whole query. */
  #totals(q: MetricsQuery, scope: Scope, ids: string[]): Record<string, number | null> {
    const groupBy = ids.length ? `GROUP BY ${ids.join(", ")}` : "HAVING COUNT(*) > 0";
    const sql = `WITH src AS (${this.#source(q)})
      SELECT COUNT(*) AS groups, SUM(cost) AS cost, SUM(usage) AS usage
      FROM (SELECT SUM(cost_nanos) AS cost, SUM(usage) AS usage FROM src ${groupBy})`;
    return this.#statement(sql).get(this.#sourceParams(q, scope)) as Record<string, number | null>;
  }

  /** One page of groups (keyset on their names) with the totals over all groups. */
  #groupsSql(q: MetricsQuery, ids: string[], keys: string[], afterCursor: boolean): string {
    const idSel = ids.length ? `${ids.join(", ")}, ` : "";
    const fieldNames = FIELDS.filter((f) => ids.includes(f.id)).map((f) => f.name);
    const named = keys.map((k, i) => `, ${fieldNames[i]} AS ${k}`).join("");
    const order = keys.length ? `ORDER BY ${keys.join(", ")}` : "";
    const cursorCond = afterCursor && keys.length ? `WHERE (${keys.join(", ")}) > (${keys.map((k) => `@c_${k}`).join(", ")})` : "";
    return `
      WITH src AS (${this.#source(q)}),
      g AS MATERIALIZED (
        SELECT ${idSel}SUM(cost_nanos) AS g_cost, SUM(usage) AS g_usage FROM src ${ids.length ? `GROUP BY ${ids.join(", ")}` : "HAVING COUNT(*) > 0"})
      SELECT *, (SELECT COUNT(*) FROM g) AS total_groups, (SELECT SUM(g_cost) FROM g) AS total_cost, (SELECT SUM(g_usage) FROM g) AS total_usage
      FROM (SELECT g.*${named} FROM g) ${cursorCond} ${order} LIMIT @limit`;
  }

  /** (group, bucket) sums for the groups listed in @page (a JSON array of id tuples). */
  #bucketsSql(q: MetricsQuery, ids: string[]): string {
    const idSel = ids.length ? `${ids.join(", ")}, ` : "";
    const inPage = ids.length ? `(${ids.join(", ")}) IN (SELECT ${ids.map((_, i) => `value ->> ${i}`).join(", ")} FROM json_each(@page))` : undefined;
    return `
      WITH src AS (${this.#source(q, inPage)})
      SELECT ${idSel}${bucketSql("ts", q.resolution)} AS bucket, SUM(cost_nanos) AS b_cost, SUM(usage) AS b_usage
      FROM src GROUP BY ${idSel}bucket`;
  }

  /** UNION ALL of raw edges and rollup days, filtered; see the module comment. */
  #source(q: MetricsQuery, extraFilter?: string): string {
    const perResource =
      q.groupBy.includes("resource_name") || q.groupBy.includes("resource_uuid") || q.resourceName !== undefined || q.resourceUuid !== undefined;
    const filters = ["ws_id IN (SELECT value FROM json_each(@ws))"];
    if (q.resourceType) filters.push("type_id = @type");
    if (q.billingDimension) filters.push("dim_id = @dim");
    if (q.resourceName !== undefined) filters.push("rn_id IN (SELECT id FROM metrics_resource_names WHERE name = @rname)");
    if (q.resourceUuid !== undefined) filters.push("res_id IN (SELECT id FROM metrics_resources WHERE uuid = @ruuid)");
    if (extraFilter) filters.push(extraFilter);
    const where = filters.join(" AND ");
    const cols = "ws_id, type_id, rn_id, res_id, dim_id, usage, cost_nanos";
    const rollup = perResource
      ? `SELECT day AS ts, ${cols} FROM metrics_daily_resource WHERE day >= @d0 AND day < @d1 AND ${where}`
      : `SELECT day AS ts, ws_id, type_id, NULL AS rn_id, NULL AS res_id, dim_id, usage, cost_nanos FROM metrics_daily_workspace WHERE day >= @d0 AND day < @d1 AND ${where}`;
    return `
      SELECT ts, ${cols} FROM metrics_usage_events WHERE ts >= @a0 AND ts < @a1 AND ${where}
      UNION ALL ${rollup}
      UNION ALL SELECT ts, ${cols} FROM metrics_usage_events WHERE ts >= @b0 AND ts < @b1 AND ${where}`;
  }

  /** Splits [start, end) into a raw head, whole rollup days and a raw tail (hourly: all raw). */
  #sourceParams(q: MetricsQuery, scope: Scope): Record<string, unknown> {
    let dayStart = Math.ceil(q.start / DAY_MS) * DAY_MS;
    let dayEnd = Math.max(dayStart, Math.floor(q.end / DAY_MS) * DAY_MS);
    if (q.resolution === "hourly") dayStart = dayEnd = q.end;
    const params: Record<string, unknown> = {
      ws: JSON.stringify(this.#store.workspaceIds(scope.workspaces)),
      a0: q.start,
      a1: Math.min(dayStart, q.end),
      d0: dayStart,
      d1: dayEnd,
      b0: dayEnd,
      b1: q.end,
    };
    if (q.resourceType) params.type = resourceTypeId(q.resourceType);
    if (q.billingDimension) params.dim = DIMENSION_BY_NAME.get(q.billingDimension)!.id;
    if (q.resourceName !== undefined) params.rname = q.resourceName;
    if (q.resourceUuid !== undefined) params.ruuid = q.resourceUuid;
    return params;
  }

  #statement(sql: string): Statement {
    let stmt = this.#cache.get(sql);
    if (!stmt) {
      if (this.#cache.size >= 256) this.#cache.clear();
      stmt = this.#store.db.prepare(sql);
      this.#cache.set(sql, stmt);
    }
    return stmt;
  }
}
