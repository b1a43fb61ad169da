import type { Request, Response } from "express";
import type { ProcessManager, StartProcessRequest } from "./manager.js";
import { follow, type DropReason, type FollowSink } from "./follow.js";
import type { StreamName } from "./output.js";
import { toProcessResponse } from "./response.js";

const EXEC_KEEPALIVE_MS = 5_000; // reference: NDJSON keepalive event every 5 s
const LOGS_KEEPALIVE_MS = 30_000; // reference: "[keepalive]" line every 30 s

/** Characters of formatted output per socket write. */
const WRITE_CHARS = 16 * 1024;

/** Text a follow produces, as formatted by the route: sent as one write per flush (a slice of output), not one per line. */
type Format = {
  line(stream: StreamName, line: string): string;
  marker(stream: StreamName, text: string): string | undefined;
  dropped(stream: StreamName, bytes: number, reason: DropReason): string;
};

function batched(res: Response, format: Format): FollowSink {
  let parts: string[] = [];
  let chars = 0;
  const flush = () => {
    if (parts.length > 0 && !res.destroyed) res.write(parts.join(""));
    parts = [];
    chars = 0;
  };
  const push = (text: string) => {
    parts.push(text);
    // Writes stay well under V8's large-object size (128 KiB): those live until a full GC, and a flood made many.
    if ((chars += text.length) >= WRITE_CHARS) flush();
  };
  return {
    line: (stream, line) => push(format.line(stream, line)),
    marker(stream, text) {
      const out = format.marker(stream, text);
      if (out !== undefined) push(out);
    },
    dropped: (stream, bytes, reason) => push(format.dropped(stream, bytes, reason)),
    flush,
  };
}

function keepAlive(res: Response, ms: number, write: () => void): void {
  const timer = setInterval(() => {
    if (!res.destroyed) write();
  }, ms);
  timer.unref();
  res.once("close", () => clearInterval(timer));
  res.once("finish", () => clearInterval(timer));
}

/**
 * POST /process with `Accept: text/event-stream`: NDJSON despite the header
 * (reference §4.5), one `{type, data}` object per line, ending with
 * `{"type":"result","data":"<ProcessResponse as a JSON string>"}`. Bad input
 * is refused before the stream starts, as a normal JSON error. Lines are sent
 * one event each (the reference sends raw chunks), which is what the SDK's
 * onLog/onStdout callbacks are used for.
 */
export async function execStream(_req: Request, res: Response, manager: ProcessManager, request: StartProcessRequest, logMaxBytes: number): Promise<void> {
  const started = await manager.start(request);
  res.status(200);
  res.set({ "Content-Type": "application/x-ndjson", "X-Accel-Buffering": "no" });
  res.flushHeaders();
  const event = (type: string, data?: string) => `${JSON.stringify(data === undefined ? { type } : { type, data })}\n`;
  const send = (type: string, data?: string) => void (!res.destroyed && res.write(event(type, data)));
  keepAlive(res, EXEC_KEEPALIVE_MS, () => send("keepalive"));
  try {
    await follow(
      res,
      manager,
      started.pid,
      logMaxBytes,
      batched(res, {
        line: (stream, line) => event(stream, line),
        marker: () => undefined, // stop/kill notices and a dropped head are for the text stream; here the result says it
        dropped: (_s, bytes, reason) => event("dropped", `${bytes} bytes of output dropped: ${dropReason(reason)}`),
      }),
    );
    const final = await manager.describe(started.pid, logMaxBytes);
    send("result", JSON.stringify(toProcessResponse(final)));
  } catch (err) {
    send("error", (err as Error).message);
  }
  if (!res.destroyed) res.end();
}

function dropReason(reason: DropReason): string {
  return reason === "slow-reader" ? "the reader was too slow" : "written faster than followed";
}

/**
 * Lines the agent itself adds to a process's stdout (restart notices): raw in
 * the log stream, as the reference writes them. (Stop and kill notices reach
 * followers without passing through the output: see follow.)
 */
function isAgentNotice(line: string): boolean {
  return /^\[(Process failed with exit code -?\d+\. Attempting restart \d+\/(\d+|unlimited)\.\.\.|Failed to restart process: .*)\]$/.test(line);
}

/**
 * GET /process/{id}/logs/stream: text/plain, one `stdout:`/`stderr:` prefixed
 * line per output line (the reference prefixes per chunk), backlog then live,
 * ending when the process has ended; restart, stop and kill notices raw, as
 * the reference writes them (§4.5). Unlike the reference, an unknown id is a
 * 404 before any byte is sent.
 */
export async function followLogs(_req: Request, res: Response, manager: ProcessManager, id: string, logMaxBytes: number): Promise<void> {
  const record = manager.get(id);
  if (!record) {
    await manager.logs(id); // throws the 404
    return;
  }
  res.status(200);
  res.set({ "Content-Type": "text/plain; charset=utf-8", "X-Accel-Buffering": "no" });
  res.flushHeaders();
  const write = (text: string) => void (!res.destroyed && res.write(text));
  keepAlive(res, LOGS_KEEPALIVE_MS, () => write("[keepalive]\n"));
  try {
    await follow(
      res,
      manager,
      record.pid,
      logMaxBytes,
      batched(res, {
        line: (s, line) => (s === "stdout" && isAgentNotice(line) ? `${line}\n` : `${s}:${line}\n`),
        marker: (_s, text) => text,
        dropped: (_s, bytes, reason) => `[output dropped: ${bytes} bytes, ${dropReason(reason)}]\n`,
      }),
    );
  } catch (err) {
    write(`[error: ${(err as Error).message}]\n`);
  }
  if (!res.destroyed) res.end();
}
