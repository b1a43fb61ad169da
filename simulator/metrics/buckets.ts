/**
 * Time buckets of the metrics timeseries. A bucket starts on a UTC boundary
 * of its resolution: the hour, 00:00, Monday 00:00, the first of the month.
 * The same boundaries exist twice — in JS (the zero-filled list) and in SQL
 * (the GROUP BY key) — and the tests pin them to each other.
 */

export const RESOLUTIONS = ["hourly", "daily", "weekly", "monthly"] as const;
export type Resolution = (typeof RESOLUTIONS)[number];

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
export const WEEK_MS = 7 * DAY_MS;
export const YEAR_MS = 365 * DAY_MS;
/** 1970-01-01 was a Thursday: shifting by 3 days puts week starts on Mondays. */
const MONDAY_SHIFT_MS = 3 * DAY_MS;

/** Largest window an explicit resolution accepts (reference §3.15); monthly has none. */
export const RESOLUTION_CAP_MS: Record<Resolution, number> = {
  hourly: 7 * DAY_MS,
  daily: 90 * DAY_MS,
  weekly: YEAR_MS,
  monthly: Number.POSITIVE_INFINITY,
};

/** The resolution the service picks when none is given: < 7 d hourly, < 90 d daily, < 1 y weekly, else monthly. */
export function autoResolution(windowMs: number): Resolution {
  if (windowMs < 7 * DAY_MS) return "hourly";
  if (windowMs < 90 * DAY_MS) return "daily";
  if (windowMs < YEAR_MS) return "weekly";
  return "monthly";
}

/** Start of the bucket holding `ts` (ms, ≥ 0). */
export function bucketStart(ts: number, resolution: Resolution): number {
  switch (resolution) {
    case "hourly":
      return Math.floor(ts / HOUR_MS) * HOUR_MS;
    case "daily":
      return Math.floor(ts / DAY_MS) * DAY_MS;
    case "weekly":
      return Math.floor((ts + MONDAY_SHIFT_MS) / WEEK_MS) * WEEK_MS - MONDAY_SHIFT_MS;
    case "monthly": {
      const d = new Date(ts);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    }
  }
}

function nextBucket(start: number, resolution: Resolution): number {
  if (resolution !== "monthly") return start + (resolution === "hourly" ? HOUR_MS : resolution === "daily" ? DAY_MS : WEEK_MS);
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** Every bucket start intersecting [start, end), in order. */
export function bucketStarts(start: number, end: number, resolution: Resolution): number[] {
  const out: number[] = [];
  for (let b = bucketStart(start, resolution); b < end; b = nextBucket(b, resolution)) out.push(b);
  return out;
}

/** SQL expression giving the bucket start of the integer millisecond column `col` (non-negative). */
export function bucketSql(col: string, resolution: Resolution): string {
  switch (resolution) {
    case "hourly":
      return `((${col} / ${HOUR_MS}) * ${HOUR_MS})`;
    case "daily":
      return `((${col} / ${DAY_MS}) * ${DAY_MS})`;
    case "weekly":
      return `(((${col} + ${MONDAY_SHIFT_MS}) / ${WEEK_MS}) * ${WEEK_MS} - ${MONDAY_SHIFT_MS})`;
    case "monthly":
      return `(CAST(strftime('%s', ${col} / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000)`;
  }
}
