import { z } from "zod";
import { errors } from "./errors.js";

/**
 * Query parameters of paginated list operations (control-plane.md §4):
 * `limit` (a larger value is silently clamped), `cursor`, `sort`, `q`.
 */
export const SORTS = ["createdAt:desc", "createdAt:asc", "name:asc", "name:desc"] as const;
export type Sort = (typeof SORTS)[number];

export interface PageLimits {
  defaultLimit: number;
  maxLimit: number;
  /** Sorts this list accepts (schedules and executions: createdAt only). */
  sorts?: readonly Sort[];
}

export const RESOURCE_PAGE: PageLimits = { defaultLimit: 50, maxLimit: 200 };
export const SCHEDULE_PAGE: PageLimits = { defaultLimit: 20, maxLimit: 100, sorts: ["createdAt:desc", "createdAt:asc"] };

export interface PageQuery {
  limit: number;
  sort: Sort;
  cursor?: string;
  /** Lower-cased search text; below 2 characters it is no filter. */
  q?: string;
}

export interface PageMeta {
  hasMore: boolean;
  /** "" on the last page, as the real service sends it. */
  nextCursor: string;
  /** All items of the list, ignoring filters and `q`. */
  total: number;
}

export interface Page<T> {
  data: T[];
  meta: PageMeta;
}

const single = (v: unknown) => (Array.isArray(v) ? v[0] : v);

export function parsePageQuery(query: Record<string, unknown>, limits: PageLimits): PageQuery {
  const rawLimit = single(query.limit);
  let limit = limits.defaultLimit;
  if (rawLimit !== undefined && rawLimit !== "") {
    const n = Number(rawLimit);
    if (!Number.isInteger(n) || n < 1) throw errors.badRequest("query.limit: expected a positive integer");
    limit = Math.min(n, limits.maxLimit);
  }
  const sorts = limits.sorts ?? SORTS;
  const rawSort = single(query.sort);
  const sort = (rawSort === undefined || rawSort === "" ? "createdAt:desc" : String(rawSort)) as Sort;
  if (!sorts.includes(sort)) throw errors.badRequest(`query.sort: expected one of ${sorts.join(", ")}`);
  const cursor = single(query.cursor);
  const q = single(query.q);
  const qText = typeof q === "string" && q.trim().length >= 2 ? q.trim().toLowerCase() : undefined;
  return { limit, sort, cursor: typeof cursor === "string" && cursor !== "" ? cursor : undefined, q: qText };
}

/** Schema form, for handlers that parse their whole query with zod. */
export const pageQuerySchema = z.object({ limit: z.string().optional(), cursor: z.string().optional(), sort: z.string().optional(), q: z.string().optional() });
