import { createRequire } from "node:module";
import { parseDuration } from "../../src/units.js";
import { CronError } from "./cron.js";
import { cronSpec, type ScheduleType } from "./due.js";
import { offsetAt, resolveLocal } from "./timezone.js";
import type * as Chrono from "chrono-node";

/** chrono-node is loaded on the first natural-language date: most agents never parse one, and it costs ~4 MB of heap each. */
let chrono: typeof Chrono | undefined;
const loadChrono = (): typeof Chrono => (chrono ??= createRequire(import.meta.url)("chrono-node") as typeof Chrono);

/**
 * Turns what a user wrote (`type` + `value` in a time zone) into what is
 * stored: a 5-field cron expression, or an `at` instant in RFC 3339 UTC.
 * `sleep` never reaches storage: it is resolved to `at = now + duration` once,
 * on creation, so a restart cannot stretch it (Blaxel's SandboxScheduleEntry doc).
 */
export type { ScheduleType };

export interface ResolvedTiming {
  type: ScheduleType;
  value: string;
}

/** A bad `value`; the message names the problem, the route prefixes the field. */
export class TimingError extends Error {}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** Strict RFC 3339 with an explicit offset; impossible dates (Feb 30) rejected. */
export function parseRfc3339(text: string): number | null {
  const m = RFC3339.exec(text.trim());
  if (!m) return null;
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  if (mo! < 1 || mo! > 12 || d! < 1 || d! > new Date(Date.UTC(y!, mo!, 0)).getUTCDate() || h! > 23 || mi! > 59 || s! > 60) return null;
  const ms = Date.parse(text.trim().replace(" ", "T"));
  return Number.isNaN(ms) ? null : ms;
}

/**
 * Natural language ("tomorrow at 9am", "in 2 hours", "next friday 17:00") with
 * chrono-node, forwardDate so "friday" means the coming one. Wall times are
 * read in `timeZone` (a DST gap moves to its end, an overlap takes the first
 * reading); expressions carrying their own offset ("in 2 hours", "...+02:00")
 * keep it. The whole text must parse: "every day at 9am" would otherwise
 * silently become one date.
 */
export function parseNaturalDate(text: string, timeZone: string, now: number): number | null {
  const offsetMinutes = offsetAt(now, timeZone) / 60_000;
  const [result] = loadChrono().parse(text, { instant: new Date(now), timezone: offsetMinutes }, { forwardDate: true });
  if (!result || result.index !== 0 || result.text.length !== text.trim().length) return null;
  const start = result.start;
  if (start.isCertain("timezoneOffset")) return start.date().getTime();
  const wall = {
    year: start.get("year")!,
    month: start.get("month")!,
    day: start.get("day")!,
    hour: start.get("hour") ?? 0,
    minute: start.get("minute") ?? 0,
    second: start.get("second") ?? 0,
  };
  return resolveLocal(wall, timeZone) + (start.get("millisecond") ?? 0);
}

export function resolveTiming(type: "cron" | "at" | "sleep", value: string, timeZone: string, now: number): ResolvedTiming {
  const text = value.trim();
  if (!text) throw new TimingError("must not be empty");
  if (type === "cron") {
    try {
      return { type, value: cronSpec(text).expression };
    } catch (e) {
      if (e instanceof CronError) throw new TimingError(e.message);
      throw e;
    }
  }
  if (type === "sleep") {
    let ms: number;
    try {
      ms = parseDuration(text, ["s", "m", "h", "d"]);
    } catch (e) {
      throw new TimingError((e as Error).message);
    }
    return { type: "at", value: new Date(now + ms).toISOString() };
  }
  const at = parseRfc3339(text) ?? parseNaturalDate(text, timeZone, now);
  if (at === null)
    throw new TimingError(`"${value}" is neither an RFC 3339 date-time (2026-07-01T09:00:00Z) nor a date chrono understands ("tomorrow at 9am", "in 2 hours")`);
  if (at <= now) throw new TimingError(`"${value}" (${new Date(at).toISOString()}) is in the past`);
  return { type: "at", value: new Date(at).toISOString() };
}
