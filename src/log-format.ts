import type { DestinationStream } from "pino";

/**
 * Readable log lines for a person at a terminal: pino still builds the JSON line (redaction included), and
 * this destination turns it into `12:03:04.120 INFO  sandbox-sim: message key=value …` before it reaches
 * the terminal. `--log-format json` (or a stderr that is not a terminal) keeps the JSON lines.
 */
export type LogFormat = "auto" | "pretty" | "json";

const LEVELS: Record<number, [string, string]> = {
  10: ["TRACE", "\x1b[90m"],
  20: ["DEBUG", "\x1b[36m"],
  30: ["INFO ", "\x1b[32m"],
  40: ["WARN ", "\x1b[33m"],
  50: ["ERROR", "\x1b[31m"],
  60: ["FATAL", "\x1b[35m"],
};
const OMIT = new Set(["level", "time", "pid", "hostname", "name", "msg"]);

function field(value: unknown): string {
  if (typeof value === "string") return /[\s="]/.test(value) || value === "" ? JSON.stringify(value) : value;
  if (value && typeof value === "object" && "message" in value && "type" in value) return JSON.stringify((value as { message: unknown }).message);
  return JSON.stringify(value) ?? String(value);
}

/** One JSON log line → one readable line (the input line unchanged when it is not JSON). */
export function prettyLine(line: string, color: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (entry.msg === "request" && typeof entry.method === "string" && typeof entry.url === "string") {
    // The front's request line, compact: GET /v0/sandboxes → 200 (1.2 ms)
    const { method, url, status, ms, ...others } = entry;
    entry = { ...others, msg: `${method} ${url} → ${String(status)}${ms === undefined ? "" : ` (${String(ms)} ms)`}` };
  }
  const [label, tint] = LEVELS[entry.level as number] ?? [String(entry.level).toUpperCase().padEnd(5), ""];
  const time = typeof entry.time === "string" ? entry.time.slice(11, 23) : new Date(Number(entry.time ?? Date.now())).toISOString().slice(11, 23);
  const rest = Object.entries(entry)
    .filter(([k]) => !OMIT.has(k))
    .map(([k, v]) => `${k}=${field(v)}`)
    .join(" ");
  const head = color ? `\x1b[90m${time}\x1b[0m ${tint}${label}\x1b[0m` : `${time} ${label}`;
  const who = entry.name ? `${entry.name}: ` : "";
  return `${head} ${who}${String(entry.msg ?? "")}${rest ? (color ? ` \x1b[90m${rest}\x1b[0m` : ` ${rest}`) : ""}`;
}

/** A pino destination that writes readable lines to `out` (stderr by default). */
export function prettyDestination(out: NodeJS.WriteStream = process.stderr): DestinationStream {
  const color = Boolean(out.isTTY) && !process.env.NO_COLOR;
  return {
    write(chunk: string): void {
      for (const line of chunk.split("\n")) if (line) out.write(`${prettyLine(line, color)}\n`);
    },
  };
}

/** `auto` is pretty when stderr is a terminal, JSON otherwise (pipes, files, CI, log collectors). */
export function usePretty(format: LogFormat, stderr: { isTTY?: boolean } = process.stderr): boolean {
  return format === "pretty" || (format === "auto" && Boolean(stderr.isTTY));
}
