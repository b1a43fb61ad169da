import pino, { type Logger, type DestinationStream } from "pino";
import { prettyDestination, usePretty, type LogFormat } from "./log-format.js";

export type { Logger };

/** Paths pino blanks out wherever they appear in a log line. */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-blaxel-authorization"]',
  'req.headers["x-service-authorization"]',
  'req.headers["x-blaxel-preview-token"]',
  "*.token",
  "*.password",
  "*.secret",
  "*.apiKey",
  "*.api_key",
  "*.client_secret",
  "*.authorization",
  "input.env.*",
  "*.input.env.*",
];

export interface LoggerOptions {
  level?: string;
  name?: string;
  destination?: DestinationStream;
  /** `auto` (default): readable lines when stderr is a terminal, JSON lines otherwise. */
  format?: LogFormat;
}

/** One structured JSON line per event, secrets redacted, to stderr by default. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      name: options.name,
      level: options.level ?? process.env.LOG_LEVEL ?? "info",
      redact: { paths: REDACT_PATHS, censor: "***" },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? (usePretty(options.format ?? "auto") ? prettyDestination() : pino.destination({ fd: 2, sync: false })),
  );
}

/** A logger that drops everything: the default for tests. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

const SENSITIVE_QUERY = /^(token|api_?key|password|secret|key|authorization|session|jwt|access_token|refresh_token|client_secret|code)$/i;

/** A request URL fit for a log line: sensitive query values replaced. */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of [...params.keys()]) if (SENSITIVE_QUERY.test(key)) params.set(key, "[REDACTED]");
  return `${url.slice(0, q)}?${params.toString()}`;
}
