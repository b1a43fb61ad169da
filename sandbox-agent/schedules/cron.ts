import { validateDetailed } from "node-cron";
import { instantsOf, gapEnd, offsetAt, localTime, type LocalTime } from "./timezone.js";

/**
 * The cron adapter. node-cron parses and validates the fields (ranges, steps,
 * lists, month and weekday names, L / W / # modifiers); the next fire time is
 * computed here, because node-cron only offers it on a live task with its own
 * timer, and one timer per schedule is what the scheduler must avoid.
 *
 * Semantics, as Vixie cron (cron(8)) and Kubernetes CronJob:
 * - exactly 5 fields: minute hour day-of-month month day-of-week (no seconds, no @nicknames);
 * - when both day-of-month and day-of-week are restricted, a day matching
 *   EITHER fires (POSIX crontab rule);
 * - DST, in the schedule's IANA zone:
 *   - a fixed-time job (neither minute nor hour starts with `*`) whose time
 *     falls in a spring-forward gap fires once, at the end of the gap
 *     (02:30 in America/New_York on the change day → 03:00 EDT); in a
 *     fall-back overlap it fires only on the first occurrence;
 *   - a wildcard job (minute or hour starts with `*`) follows the clock: times
 *     inside the gap do not exist and do not fire, repeated times fire twice.
 */
export interface CronSpec {
  expression: string;
  minutes: number[];
  hours: number[];
  months: ReadonlySet<number>;
  dom: readonly (number | string)[];
  dow: readonly (number | string)[];
  domRestricted: boolean;
  dowRestricted: boolean;
  wildcardTime: boolean;
}

export class CronError extends Error {}

const FIELD_NAMES = ["minute", "hour", "day-of-month", "month", "day-of-week"];
const NODE_CRON_FIELD: Record<string, string> = { minute: "minute", hour: "hour", dayOfMonth: "day-of-month", month: "month", dayOfWeek: "day-of-week" };

function sortedUnique(values: readonly (number | string)[]): number[] {
  return [...new Set(values.filter((v): v is number => typeof v === "number"))].sort((a, b) => a - b);
}

function unrestricted(field: string): boolean {
  return field.startsWith("*") || field === "?";
}

export function parseCron(expression: string): CronSpec {
  const text = expression.trim();
  if (text.startsWith("@")) throw new CronError(`"${expression}": nicknames such as @daily are not supported; write the 5 fields (e.g. "0 0 * * *")`);
  const fields = text.split(/\s+/);
  if (fields.length !== 5) {
    const hint = fields.length === 6 ? " (a seconds field is not supported)" : "";
    throw new CronError(`"${expression}": expected exactly 5 fields (${FIELD_NAMES.join(" ")}), got ${fields.length}${hint}`);
  }
  let result;
  try {
    result = validateDetailed(fields.join(" "));
  } catch (e) {
    throw new CronError(`"${expression}": ${(e as Error).message}`);
  }
  if (!result.valid || !result.fields) {
    const first = result.errors[0];
    const field = first ? (NODE_CRON_FIELD[first.field] ?? first.field) : "expression";
    throw new CronError(`"${expression}": invalid ${field} field${first?.value !== undefined ? ` "${first.value}"` : ""}`);
  }
  const f = result.fields;
  return {
    expression: fields.join(" "),
    minutes: sortedUnique(f.minute),
    hours: sortedUnique(f.hour),
    months: new Set(sortedUnique(f.month)),
    dom: f.dayOfMonth,
    dow: f.dayOfWeek,
    domRestricted: !unrestricted(fields[2]!),
    dowRestricted: !unrestricted(fields[4]!),
    wildcardTime: fields[0]!.startsWith("*") || fields[1]!.startsWith("*"),
  };
}

function lastDayOfMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function weekdayOf(year: number, month: number, day: number): number {
  return new Date(Date.UTC(year, month - 1, day)).getUTCDay();
}

function nearestWeekday(year: number, month: number, target: number): number {
  const last = lastDayOfMonth(year, month);
  if (target < 1 || target > last) return -1;
  const wd = weekdayOf(year, month, target);
  if (wd === 6) return target === 1 ? 3 : target - 1;
  if (wd === 0) return target === last ? target - 2 : target + 1;
  return target;
}

function matchesDom(tokens: readonly (number | string)[], y: number, m: number, d: number): boolean {
  for (const t of tokens) {
    if (t === d) return true;
    if (typeof t !== "string") continue;
    if (t === "L" && d === lastDayOfMonth(y, m)) return true;
    const lw = /^(\d{1,2}|L)W$/.exec(t);
    if (lw && nearestWeekday(y, m, lw[1] === "L" ? lastDayOfMonth(y, m) : Number(lw[1])) === d) return true;
    const lminus = /^L-(\d{1,2})$/.exec(t);
    if (lminus && lastDayOfMonth(y, m) - Number(lminus[1]) === d) return true;
  }
  return false;
}

function matchesDow(tokens: readonly (number | string)[], y: number, m: number, d: number): boolean {
  const wd = weekdayOf(y, m, d);
  for (const t of tokens) {
    if (t === wd) return true;
    if (typeof t !== "string") continue;
    const nth = /^([0-7])#([1-5])$/.exec(t);
    if (nth && Number(nth[1]) % 7 === wd && Math.floor((d - 1) / 7) + 1 === Number(nth[2])) return true;
    const last = /^([0-7])L$/i.exec(t);
    if (last && Number(last[1]) % 7 === wd && d + 7 > lastDayOfMonth(y, m)) return true;
  }
  return false;
}

export function matchesDay(spec: CronSpec, y: number, m: number, d: number): boolean {
  if (!spec.months.has(m)) return false;
  if (spec.domRestricted && spec.dowRestricted) return matchesDom(spec.dom, y, m, d) || matchesDow(spec.dow, y, m, d);
  return matchesDom(spec.dom, y, m, d) && matchesDow(spec.dow, y, m, d);
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Offsets in the tz database lie within [-12 h, +14 h]. */
const MAX_OFFSET = 14 * HOUR;
/** Far enough for `0 0 29 2 1` (Feb 29 on a Monday, OR rule aside). */
const MAX_DAYS = 366 * 30;

/** Instants a matching wall time fires at, following the DST rule above. */
function firingInstants(spec: CronSpec, t: LocalTime, timeZone: string): number[] {
  const instants = instantsOf(t, timeZone);
  if (instants.length === 0) return spec.wildcardTime ? [] : [gapEnd(t, timeZone)];
  if (instants.length > 1 && !spec.wildcardTime) return [instants[0]!];
  return instants;
}

/** The first fire time strictly after `afterMs`, or null if none within 30 years. */
export function nextCronFire(spec: CronSpec, timeZone: string, afterMs: number): number | null {
  const start = localTime(afterMs - DAY, timeZone);
  let dayWall = Date.UTC(start.year, start.month - 1, start.day);
  let best = Infinity;
  for (let i = 0; i < MAX_DAYS; i++, dayWall += DAY) {
    // Walls ascend; an instant is within MAX_OFFSET of its wall, so once a
    // day begins far enough past the best instant nothing later can beat it.
    if (dayWall - MAX_OFFSET > best) break;
    const date = new Date(dayWall);
    const y = date.getUTCFullYear();
    const m = date.getUTCMonth() + 1;
    const d = date.getUTCDate();
    if (dayWall + DAY + MAX_OFFSET <= afterMs || !matchesDay(spec, y, m, d)) continue;
    // One offset around the whole day (the usual case) means wall → instant is
    // a plain subtraction; only the two transition days a year take the slow path.
    const offset = offsetAt(dayWall - MAX_OFFSET, timeZone);
    const stable = offset === offsetAt(dayWall + DAY + MAX_OFFSET, timeZone);
    for (const hour of spec.hours) {
      for (const minute of spec.minutes) {
        const wall = dayWall + hour * HOUR + minute * 60_000;
        if (wall + MAX_OFFSET <= afterMs) continue;
        if (wall - MAX_OFFSET > best) break;
        const instants = stable ? [wall - offset] : firingInstants(spec, { year: y, month: m, day: d, hour, minute, second: 0 }, timeZone);
        for (const instant of instants) if (instant > afterMs && instant < best) best = instant;
        if (stable && best !== Infinity && wall - offset >= best) break;
      }
    }
  }
  return best === Infinity ? null : best;
}
