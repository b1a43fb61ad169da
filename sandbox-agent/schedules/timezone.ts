/**
 * Wall-clock arithmetic in IANA time zones with nothing but Intl: what a UTC
 * instant reads as in a zone, and which instants a local wall time maps to
 * (none inside a spring-forward gap, two inside a fall-back overlap).
 */

export interface LocalTime {
  year: number;
  /** 1-12 */
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    if (formatters.size >= 1_000) formatters.clear(); // zones arrive from requests: keep the cache bounded
    formatters.set(timeZone, f);
  }
  return f;
}

export function isUtc(timeZone: string): boolean {
  return timeZone === "UTC" || timeZone === "Etc/UTC" || timeZone === "GMT" || timeZone === "Etc/GMT";
}

/** True when Intl knows the zone (IANA names, case-insensitive, plus UTC). */
export function isValidTimeZone(timeZone: string): boolean {
  if (!timeZone || timeZone.length > 64) return false;
  try {
    formatterFor(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** The canonical spelling of a zone (`europe/paris` → `Europe/Paris`). */
const canonical = new Map<string, string>();

export function canonicalTimeZone(timeZone: string): string {
  let name = canonical.get(timeZone);
  if (name === undefined) {
    name = formatterFor(timeZone).resolvedOptions().timeZone;
    if (canonical.size < 1_000) canonical.set(timeZone, name);
  }
  return name;
}

export function localTime(ms: number, timeZone: string): LocalTime {
  if (isUtc(timeZone)) {
    const d = new Date(ms);
    return {
      year: d.getUTCFullYear(),
      month: d.getUTCMonth() + 1,
      day: d.getUTCDate(),
      hour: d.getUTCHours(),
      minute: d.getUTCMinutes(),
      second: d.getUTCSeconds(),
    };
  }
  const out: Record<string, number> = {};
  for (const part of formatterFor(timeZone).formatToParts(new Date(ms))) {
    if (part.type !== "literal") out[part.type] = Number(part.value);
  }
  return { year: out.year!, month: out.month!, day: out.day!, hour: out.hour! % 24, minute: out.minute!, second: out.second! };
}

function wallMs(t: LocalTime): number {
  return Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute, t.second);
}

/** Offset of the zone at `ms`: local wall time minus UTC, in milliseconds. */
export function offsetAt(ms: number, timeZone: string): number {
  if (isUtc(timeZone)) return 0;
  const whole = Math.floor(ms / 1000) * 1000;
  return wallMs(localTime(whole, timeZone)) - whole;
}

/**
 * Every instant whose wall time in `timeZone` is `t`, ascending: one normally,
 * none in a gap, two in an overlap. Assumes at most one offset change within
 * ±14 h, which holds for every zone in the tz database.
 */
export function instantsOf(t: LocalTime, timeZone: string): number[] {
  const wall = wallMs(t);
  if (isUtc(timeZone)) return [wall];
  const offsets = new Set([offsetAt(wall - 14 * 3_600_000, timeZone), offsetAt(wall + 14 * 3_600_000, timeZone)]);
  const found: number[] = [];
  for (const offset of offsets) {
    const instant = wall - offset;
    if (wallMs(localTime(instant, timeZone)) === wall && !found.includes(instant)) found.push(instant);
  }
  return found.sort((a, b) => a - b);
}

/**
 * For a wall time that does not exist (inside a spring-forward gap): the
 * instant the gap ends, i.e. the first instant whose wall time is later than `t`.
 */
export function gapEnd(t: LocalTime, timeZone: string): number {
  const wall = wallMs(t);
  // The transition lies between the two readings of `wall` with the offsets
  // before and after it; bisect to the second.
  const before = offsetAt(wall - 14 * 3_600_000, timeZone);
  const after = offsetAt(wall + 14 * 3_600_000, timeZone);
  let lo = wall - Math.max(before, after); // reads earlier than `wall`
  let hi = wall - Math.min(before, after); // reads later than `wall`
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2000) * 1000;
    if (mid <= lo || mid >= hi) break;
    if (wallMs(localTime(mid, timeZone)) > wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The local wall time `t` in `timeZone` as one instant: gap → its end, overlap → first. */
export function resolveLocal(t: LocalTime, timeZone: string): number {
  const instants = instantsOf(t, timeZone);
  return instants[0] ?? gapEnd(t, timeZone);
}
