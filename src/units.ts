/**
 * Strict parsers for the human-written durations and sizes used in options and
 * in `sleep` schedules. They reject rather than guess: `10`, `-5m` and `0m` are
 * errors, not zero.
 */

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(?:\d+(?:ms|s|m|h|d))+$/;
const DURATION_PART = /(\d+)(ms|s|m|h|d)/g;

/**
 * `30s`, `15m`, `2h`, `7d`, `1h30m`, `500ms` → milliseconds. Units may not repeat
 * and must go from the largest to the smallest.
 */
export function parseDuration(text: string, allowed: readonly string[] = ["ms", "s", "m", "h", "d"]): number {
  const value = text.trim();
  if (!DURATION.test(value))
    throw new Error(`invalid duration "${text}": expected a positive number with a unit (${allowed.join(", ")}), e.g. 30s, 15m, 2h, 1h30m`);
  let total = 0;
  let lastRank = Infinity;
  for (const [, digits, unit] of value.matchAll(DURATION_PART)) {
    if (!unit || !allowed.includes(unit)) throw new Error(`invalid duration "${text}": unit "${unit}" is not allowed (use ${allowed.join(", ")})`);
    const rank = DURATION_UNITS[unit]!;
    if (rank >= lastRank) throw new Error(`invalid duration "${text}": units must go from largest to smallest, each once`);
    lastRank = rank;
    total += Number(digits) * rank;
  }
  if (!Number.isSafeInteger(total)) throw new Error(`invalid duration "${text}": too large`);
  if (total <= 0) throw new Error(`invalid duration "${text}": must be greater than zero`);
  return total;
}

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** `5GiB`, `100MiB`, `512k`, `1048576` → bytes. */
export function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = match?.[2]?.toLowerCase() ?? "";
  const factor = SIZE_UNITS[unit];
  if (!match || factor === undefined) throw new Error(`invalid size "${text}": expected a number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB)`);
  const bytes = Math.floor(Number(match[1]) * factor);
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new Error(`invalid size "${text}": must be a positive size`);
  return bytes;
}

export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
}
