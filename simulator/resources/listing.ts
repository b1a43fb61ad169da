import { errors } from "../../src/errors.js";
import { parsePageQuery, RESOURCE_PAGE, type Page, type PageLimits } from "../../src/pagination.js";
import type { CursorCodec } from "../../src/cursor.js";
import type { OpContext } from "../http/operation.js";
import type { ResourceStore, StoredResource } from "../store/resources.js";

/**
 * How a list answers (control-plane.md §4): "versioned" = bare array below
 * 2026-04-28 and {data, meta} from it; "paged" = always {data, meta};
 * "bare" = always a plain array of everything.
 */
export type ListShape = "versioned" | "paged" | "bare";

export interface ListRequest {
  kind: string;
  /** Parent key; null = under every parent. */
  parent?: string | null;
  shape: ListShape;
  limits?: PageLimits;
  statuses?: string[];
  excludeStatuses?: string[];
  /** Items failing this are dropped after the SQL read (rare filters such as externalId). */
  keep?: (item: StoredResource) => boolean;
  /** The values `keep` filters on: part of what a cursor is bound to. */
  filters?: Record<string, unknown>;
}

interface Position {
  createdMs: number;
  name: string;
}

export function listResources<T>(
  deps: { resources: ResourceStore; cursors: CursorCodec },
  ctx: OpContext,
  request: ListRequest,
  render: (item: StoredResource) => T,
): T[] | Page<T> {
  const { workspace } = ctx;
  const store = deps.resources;
  const paged = request.shape === "paged" || (request.shape === "versioned" && ctx.paginated);
  const base = { workspace, kind: request.kind, parent: request.parent === undefined ? "" : request.parent };
  if (!paged) {
    const all = store.list({ ...base, sort: "createdAt:desc", statuses: request.statuses, excludeStatuses: request.excludeStatuses });
    return all.filter((i) => request.keep?.(i) ?? true).map(render);
  }
  const page = parsePageQuery(ctx.query, request.limits ?? RESOURCE_PAGE);
  const binding = { ...base, sort: page.sort, q: page.q, statuses: request.statuses, excluded: request.excludeStatuses, filters: request.filters };
  // anchor=end jumps to the tail page of a createdAt order (the oldest items for createdAt:desc).
  if (ctx.query.anchor === "end" && !page.cursor && page.sort.startsWith("createdAt")) {
    const reversed = page.sort === "createdAt:desc" ? "createdAt:asc" : "createdAt:desc";
    const tail = store
      .list({ ...base, sort: reversed, q: page.q, statuses: request.statuses, excludeStatuses: request.excludeStatuses })
      .filter((i) => request.keep?.(i) ?? true)
      .slice(0, page.limit)
      .reverse();
    return { data: tail.map(render), meta: { hasMore: false, nextCursor: "", total: store.count(workspace, request.kind, base.parent) } };
  }
  const after = page.cursor ? deps.cursors.decode<Position>(page.cursor, binding) : undefined;
  if (after !== undefined && (typeof after?.createdMs !== "number" || typeof after?.name !== "string")) throw errors.badRequest("cursor: invalid cursor");
  const items: StoredResource[] = [];
  let cursorAt = after;
  let hasMore = false;
  // Read limit+1 to learn whether another page exists; loop only when `keep` drops rows.
  for (;;) {
    const rows = store.list({
      ...base,
      sort: page.sort,
      after: cursorAt,
      q: page.q,
      statuses: request.statuses,
      excludeStatuses: request.excludeStatuses,
      limit: page.limit + 1,
    });
    for (const row of rows) {
      if (items.length === page.limit) {
        hasMore = true;
        break;
      }
      cursorAt = { createdMs: row.createdMs, name: row.name };
      if (request.keep?.(row) ?? true) items.push(row);
    }
    if (hasMore || rows.length <= page.limit) break;
  }
  const last = items[items.length - 1];
  const nextCursor = hasMore && last ? deps.cursors.encode({ createdMs: last.createdMs, name: last.name }, binding) : "";
  return { data: items.map(render), meta: { hasMore, nextCursor, total: store.count(workspace, request.kind, base.parent) } };
}
