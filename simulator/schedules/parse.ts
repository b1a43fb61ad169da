import { errors } from "../../src/errors.js";
import { parseDuration } from "../../src/units.js";

/**
 * Pure schedule-value parsing, the same rules as the agent: `sleep` durations
 * in s, m, h, d (src/units.ts parseDuration) resolved to an `at` RFC 3339
 * time on creation; `at` RFC 3339; `cron` five fields.
 * (sandbox-agent/schedules did not exist when this was written; if it later
 * exports pure parsers, this module should delegate to them.)
 */
export type StoredType = "cron" | "at";

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export function normalizeScheduleValue(type: "cron" | "at" | "sleep", value: string, nowMs: number): { type: StoredType; value: string } {
  if (type === "sleep") {
    let ms: number;
    try {
      ms = parseDuration(value, ["s", "m", "h", "d"]);
    } catch (e) {
      throw errors.badRequest(`value: ${(e as Error).message}`);
    }
    return { type: "at", value: new Date(nowMs + ms).toISOString() };
  }
  if (type === "at") {
    if (!RFC3339.test(value) || Number.isNaN(Date.parse(value))) throw errors.badRequest(`value: "${value}" is not an RFC 3339 date-time`);
    return { type: "at", value: new Date(Date.parse(value)).toISOString() };
  }
  parseCron(value);
  return { type: "cron", value: value.trim().split(/\s+/).join(" ") };
}

export interface CronFields {
  minute: Set<number>;
  hour: Set<number>;
  day: Set<number>;
  month: Set<number>;
  weekday: Set<number>;
  /** Standard cron: when both day and weekday are restricted, either may match. */
  dayRestricted: boolean;
  weekdayRestricted: boolean;
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

function field(text: string, min: number, max: number, label: string, names?: string[], nameBase = 0): Set<number> {
  const out = new Set<number>();
  const num = (t: string): number => {
    const named = names?.indexOf(t.toLowerCase()) ?? -1;
    const n = named >= 0 ? named + nameBase : /^\d+$/.test(t) ? Number(t) : NaN;
    if (!Number.isInteger(n) || n < min || n > max) throw errors.badRequest(`value: cron ${label} "${t}" out of range ${min}-${max}`);
    return n;
  };
  for (const part of text.split(",")) {
    const [range, stepText] = part.split("/") as [string, string | undefined];
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) throw errors.badRequest(`value: cron ${label} step "${stepText}" invalid`);
    let lo = min;
    let hi = max;
    if (range !== "*") {
      const [a, b] = range.split("-") as [string, string | undefined];
      lo = num(a);
      hi = b === undefined ? (stepText === undefined ? lo : max) : num(b);
      if (hi < lo) throw errors.badRequest(`value: cron ${label} range "${range}" is reversed`);
    }
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

export function parseCron(expression: string): CronFields {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) throw errors.badRequest(`value: a cron expression has 5 fields (minute hour day month weekday), got ${parts.length}`);
  const [mi, ho, da, mo, wd] = parts as [string, string, string, string, string];
  const weekday = field(wd, 0, 7, "weekday", DAYS);
  if (weekday.has(7)) weekday.add(0);
  return {
    minute: field(mi, 0, 59, "minute"),
    hour: field(ho, 0, 23, "hour"),
    day: field(da, 1, 31, "day"),
    month: field(mo, 1, 12, "month", MONTHS, 1),
    weekday,
    dayRestricted: da !== "*",
    weekdayRestricted: wd !== "*",
  };
}

export function cronMatches(f: CronFields, ms: number): boolean {
  const d = new Date(ms);
  if (!f.minute.has(d.getUTCMinutes()) || !f.hour.has(d.getUTCHours()) || !f.month.has(d.getUTCMonth() + 1)) return false;
  const dayOk = f.day.has(d.getUTCDate());
  const weekdayOk = f.weekday.has(d.getUTCDay());
  if (f.dayRestricted && f.weekdayRestricted) return dayOk || weekdayOk;
  return dayOk && weekdayOk;
}

/**
 * Firing times in (fromMs, toMs], newest `cap` only (older ones would be
 * trimmed by maxExecutions anyway). Cron times are whole UTC minutes.
 */
export function dueFirings(type: StoredType, value: string, fromMs: number, toMs: number, cap: number): number[] {
  if (type === "at") {
    const at = Date.parse(value);
    return at > fromMs && at <= toMs ? [at] : [];
  }
  const fields = parseCron(value);
  const out: number[] = [];
  let t = Math.floor(toMs / 60_000) * 60_000;
  // Walk back from now; bounded to a year of minutes.
  for (let i = 0; t > fromMs && out.length < cap && i < 527_040; i++, t -= 60_000) if (cronMatches(fields, t)) out.push(t);
  return out.reverse();
}
