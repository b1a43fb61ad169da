import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { autoResolution, RESOLUTION_CAP_MS, RESOLUTIONS, YEAR_MS, type Resolution } from "./buckets.js";
import { BILLING_DIMENSION_NAMES, GROUP_BY_VALUES, isGroupBy, RESOURCE_TYPES, type GroupByDimension, type ResourceType } from "./dimensions.js";

/** A validated, normalized metrics query: what the SQL runs and what the cursor is bound to. */
export interface MetricsQuery {
  start: number;
  end: number;
  resolution: Resolution;
  /** Canonical order (GROUP_BY_VALUES): groupBy is order-insensitive. */
  groupBy: GroupByDimension[];
  workspace?: string;
  resourceType?: ResourceType;
  billingDimension?: string;
  resourceName?: string;
  resourceUuid?: string;
  limit: number;
  cursor?: string;
}

export const MAX_GROUP_BY = 3;
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 100;
/** A monthly window has no cap in the reference; 100 years keeps a response bounded (1,200 buckets). */
const MAX_WINDOW_MS = 100 * YEAR_MS;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Parses an RFC 3339 date-time (`T` or `t`, offset `Z`/`z`/`±HH:MM` required,
 * fractions to the nanosecond, calendar-checked) to epoch ms (≥ 0), or
 * undefined. Reads characters by position: the bulk ingest parses one per event.
 */
export function parseRfc3339(value: string): number | undefined {
  const n = value.length;
  if (n < 20 || n > 35) return undefined;
  const year = digit(value, 0) * 1000 + digit(value, 1) * 100 + digit(value, 2) * 10 + digit(value, 3);
  const month = two(value, 5);
  const day = two(value, 8);
  const hour = two(value, 11);
  const minute = two(value, 14);
  const second = two(value, 17);
  const t = value.charCodeAt(10);
  if (
    value.charCodeAt(4) !== DASH ||
    value.charCodeAt(7) !== DASH ||
    (t !== UPPER_T && t !== LOWER_T) ||
    value.charCodeAt(13) !== COLON ||
    value.charCodeAt(16) !== COLON
  )
    return undefined;
  if (!(year >= 1970 && month >= 1 && month <= 12 && day >= 1 && hour <= 23 && minute <= 59 && second <= 59)) return undefined;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > DAYS_IN_MONTH[month - 1]! + (month === 2 && leap ? 1 : 0)) return undefined;
  let i = 19;
  let ms = 0;
  if (value.charCodeAt(i) === DOT) {
    const from = ++i;
    while (i < n && digit(value, i) >= 0) i++;
    if (i === from || i - from > 9) return undefined;
    // Three digits (what toISOString writes) are the milliseconds as they stand: the same value the general rule gives.
    ms =
      i - from === 3 ? digit(value, from) * 100 + digit(value, from + 1) * 10 + digit(value, from + 2) : Math.floor(Number(`0.${value.slice(from, i)}`) * 1000);
  }
  let offsetMin = 0;
  const z = value.charCodeAt(i);
  if (z === UPPER_Z || z === LOWER_Z) i++;
  else if ((z === PLUS || z === DASH) && value.charCodeAt(i + 3) === COLON) {
    const oh = two(value, i + 1);
    const om = two(value, i + 4);
    if (!(oh <= 23 && om <= 59)) return undefined;
    offsetMin = (z === PLUS ? 1 : -1) * (oh * 60 + om);
    i += 6;
  } else return undefined;
  if (i !== n) return undefined;
  // Date.UTC(year, month - 1, day, ...) without its call: exact for the years accepted above (1970–9999).
  const result = daysFromCivil(year, month, day) * 86_400_000 + hour * 3_600_000 + minute * 60_000 + second * 1000 + ms - offsetMin * 60_000;
  return result >= 0 ? result : undefined;
}

const [DASH, COLON, DOT, PLUS, UPPER_T, LOWER_T, UPPER_Z, LOWER_Z] = [..."-:.+TtZz"].map((c) => c.charCodeAt(0)) as [
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
];

/** The decimal digit at `i`, or NaN (which fails every range check after it). */
function digit(value: string, i: number): number {
  const c = value.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : NaN;
}

function two(value: string, i: number): number {
  return digit(value, i) * 10 + digit(value, i + 1);
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil), for year >= 1. */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

const single = (name: string) => z.string({ error: (iss) => (iss.input === undefined ? `${name} is required` : `${name} must be given once`) });
const optionalSingle = (name: string) => z.string({ error: `${name} must be given once` }).optional();

const querySchema = z.object({
  startTime: single("startTime").refine((v) => parseRfc3339(v) !== undefined, "startTime must be an RFC 3339 date-time with offset, e.g. 2026-01-01T00:00:00Z"),
  endTime: single("endTime").refine((v) => parseRfc3339(v) !== undefined, "endTime must be an RFC 3339 date-time with offset, e.g. 2026-01-31T00:00:00Z"),
  groupBy: optionalSingle("groupBy"),
  resolution: z.enum(RESOLUTIONS, { error: `resolution must be one of ${RESOLUTIONS.join(", ")}` }).optional(),
  resourceType: z.enum(RESOURCE_TYPES, { error: `resourceType must be one of ${RESOURCE_TYPES.join(", ")}` }).optional(),
  billingDimension: z.enum(BILLING_DIMENSION_NAMES as [string, ...string[]], { error: "billingDimension must be a billing dimension" }).optional(),
  workspace: optionalSingle("workspace"),
  resourceName: optionalSingle("resourceName"),
  resourceUuid: optionalSingle("resourceUuid"),
  limit: optionalSingle("limit").refine((v) => v === undefined || /^[1-9]\d{0,8}$/.test(v), "limit must be a positive integer"),
  cursor: optionalSingle("cursor"),
});

/** The window parameters alone (the resource-types enum takes only these). */
export function parseWindow(raw: unknown): { start: number; end: number } {
  const q = parse(querySchema.pick({ startTime: true, endTime: true }), raw, "query");
  return checkWindow(q.startTime, q.endTime);
}

function checkWindow(startTime: string, endTime: string): { start: number; end: number } {
  const start = parseRfc3339(startTime)!;
  const end = parseRfc3339(endTime)!;
  if (start >= end) throw errors.badRequest("query.endTime: endTime must be after startTime");
  if (end - start > MAX_WINDOW_MS) throw errors.badRequest("query.endTime: the window may span at most 100 years");
  return { start, end };
}

export function parseGroupBy(value: string | undefined): GroupByDimension[] {
  if (value === undefined || value.trim() === "") return [];
  const parts = value.split(",").map((p) => p.trim());
  if (parts.length > MAX_GROUP_BY) throw errors.badRequest(`query.groupBy: at most ${MAX_GROUP_BY} dimensions, got ${parts.length}`);
  const seen = new Set<string>();
  for (const p of parts) {
    if (!isGroupBy(p)) throw errors.badRequest(`query.groupBy: unknown dimension "${p}" (valid: ${GROUP_BY_VALUES.join(", ")})`);
    if (seen.has(p)) throw errors.badRequest(`query.groupBy: duplicate dimension "${p}"`);
    seen.add(p);
  }
  return GROUP_BY_VALUES.filter((g) => seen.has(g));
}

/** Validates the metrics query string; every failure is a 400 naming the parameter. */
export function parseMetricsQuery(raw: unknown): MetricsQuery {
  const q = parse(querySchema, raw, "query");
  const { start, end } = checkWindow(q.startTime, q.endTime);
  const groupBy = parseGroupBy(q.groupBy);
  const windowMs = end - start;
  if (q.resolution && windowMs > RESOLUTION_CAP_MS[q.resolution]) {
    const days = RESOLUTION_CAP_MS[q.resolution] / 86_400_000;
    throw errors.badRequest(`query.resolution: ${q.resolution} allows a window of at most ${days} days`);
  }
  return {
    start,
    end,
    resolution: q.resolution ?? autoResolution(windowMs),
    groupBy,
    workspace: q.workspace,
    resourceType: q.resourceType,
    billingDimension: q.billingDimension,
    resourceName: q.resourceName,
    resourceUuid: q.resourceUuid,
    // Larger values are silently clamped, as the reference service does.
    limit: Math.min(q.limit === undefined ? DEFAULT_LIMIT : Number(q.limit), MAX_LIMIT),
    cursor: q.cursor,
  };
}
