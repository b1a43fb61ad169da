import type { Sort } from "../../src/pagination.js";

/**
 * The resource table's rows as the store sees them: a stored resource and its row, the list filter and the
 * SQL it becomes, and the cache's keys and limits. The store that reads and writes them is resources.ts.
 */

/** One stored workspace resource: its key, list-order columns and JSON document. */
export interface StoredResource<D = Record<string, unknown>> {
  workspace: string;
  kind: string;
  parent: string;
  name: string;
  createdMs: number;
  status: string;
  doc: D;
}

/** A resource written ("saved": inserted or updated) or deleted through the store (ResourceStore.onChange). */
export interface ResourceChange {
  type: "saved" | "deleted";
  item: StoredResource<object>;
}

export interface Row {
  workspace: string;
  kind: string;
  parent: string;
  name: string;
  created_ms: number;
  status: string;
  doc: string;
}

export interface ListFilter {
  workspace: string;
  kind: string;
  /** Parent key; null lists the kind under every parent (e.g. /schedules across sandboxes). */
  parent?: string | null;
  sort: Sort;
  /** Keyset position: the last item of the previous page. */
  after?: { createdMs: number; name: string };
  q?: string;
  statuses?: string[];
  excludeStatuses?: string[];
  limit?: number;
}

export const ORDER: Record<Sort, { by: string; cmp: string }> = {
  // Row values let SQLite seek the (…, created_ms, name) index instead of scanning.
  "createdAt:desc": { by: "created_ms DESC, name DESC", cmp: "(created_ms, name) < (@afterMs, @afterName)" },
  "createdAt:asc": { by: "created_ms ASC, name ASC", cmp: "(created_ms, name) > (@afterMs, @afterName)" },
  "name:asc": { by: "name ASC", cmp: "name > @afterName" },
  "name:desc": { by: "name DESC", cmp: "name < @afterName" },
};

/** A list's query: the filter's conditions, in the sort's order, rowids only. */
export function listQuery(filter: ListFilter): { sql: string; params: Record<string, unknown> } {
  const where = ["workspace = @workspace", "kind = @kind"];
  const params: Record<string, unknown> = { workspace: filter.workspace, kind: filter.kind };
  if (filter.parent !== null) {
    where.push("parent = @parent");
    params.parent = filter.parent ?? "";
  }
  if (filter.after) {
    where.push(ORDER[filter.sort].cmp);
    params.afterMs = filter.after.createdMs;
    params.afterName = filter.after.name;
  }
  if (filter.q) {
    where.push("instr(search, @q) > 0");
    params.q = filter.q;
  }
  if (filter.statuses?.length) {
    where.push("status IN (SELECT value FROM json_each(@statuses))");
    params.statuses = JSON.stringify(filter.statuses);
  }
  if (filter.excludeStatuses?.length) {
    where.push("status NOT IN (SELECT value FROM json_each(@excluded))");
    params.excluded = JSON.stringify(filter.excludeStatuses);
  }
  // Rowids only (the (…, created_ms, name) index holds them, so SQLite never touches the
  // table for a cached page): documents come from the cache, read by rowid on a miss.
  let sql = `SELECT rowid FROM resources WHERE ${where.join(" AND ")} ORDER BY ${ORDER[filter.sort].by}`;
  if (filter.limit !== undefined) {
    sql += " LIMIT @limit";
    params.limit = filter.limit;
  }
  return { sql, params };
}

export const CACHE_LIMIT = 50_000;
/** Cached list queries per workspace and kind (each a few hundred rowids at most with a limit). */
export const PAGES_PER_KIND = 1_000;
/** The key of allOfKind's rowids among a kind's list queries (those are keyed by their SQL). */
export const ALL_OF_KIND = "allOfKind";

export interface RenderedEntry {
  /** The document and status the texts were rendered from. */
  doc: unknown;
  status: string;
  texts: Map<string, string>;
}
export const cacheKey = (workspace: string, kind: string, parent: string, name: string) => `${workspace}\u0000${kind}\u0000${parent}\u0000${name}`;

export function keyOf(item: StoredResource<unknown>) {
  return { workspace: item.workspace, kind: item.kind, parent: item.parent, name: item.name };
}

export function toStored<D>(row: Row): StoredResource<D> {
  return {
    workspace: row.workspace,
    kind: row.kind,
    parent: row.parent,
    name: row.name,
    createdMs: row.created_ms,
    status: row.status,
    doc: JSON.parse(row.doc) as D,
  };
}

/** What `q` searches: name, displayName, label keys and values (control-plane.md §4), lower-cased. */
export function searchText(doc: unknown): string {
  const d = doc as { metadata?: { name?: unknown; displayName?: unknown; labels?: Record<string, unknown> }; name?: unknown; id?: unknown };
  const meta = d?.metadata ?? {};
  const parts = [meta.name ?? d?.name ?? d?.id, meta.displayName];
  for (const [k, v] of Object.entries(meta.labels ?? {})) parts.push(k, v);
  return parts
    .filter((p) => typeof p === "string")
    .join("\n")
    .toLowerCase();
}
