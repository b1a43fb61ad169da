import type { Request, Response } from "express";
import type { ProcessManager, StartProcessRequest } from "./manager.js";
import { truncationMarker, type StreamName } from "./output.js";
import type { OutputListener } from "./live-output.js";
import { toProcessResponse } from "./response.js";

const EXEC_KEEPALIVE_MS = 5_000; // reference: NDJSON keepalive event every 5 s
const LOGS_KEEPALIVE_MS = 30_000; // reference: "[keepalive]" line every 30 s

/** The longest line sent as one event; a longer one (400 MB without a newline) goes out in pieces of this size. */
export const MAX_EVENT_CHARS = 64 * 1024;
/** Bytes a slow reader may have waiting in the socket's buffer before output queues in the agent. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;
/** Output queued in the agent for a slow reader beyond the socket's buffer; more is dropped. */
export const MAX_PENDING_BYTES = 8 * 1024 * 1024;

/** Splits chunks into whole lines per stream; a partial line waits for its end (or for flush), up to MAX_EVENT_CHARS. */
class LineSplitter {
  readonly #partial: Record<StreamName, string> = { stdout: "", stderr: "" };
  constructor(private readonly emit: (stream: StreamName, line: string) => void) {}

  push(stream: StreamName, text: string): void {
    const lines = (this.#partial[stream] + text).split("\n");
    let partial = lines.pop()!;
    for (const line of lines) this.#emitBounded(stream, line);
    while (partial.length > MAX_EVENT_CHARS) {
      this.emit(stream, partial.slice(0, MAX_EVENT_CHARS));
      partial = partial.slice(MAX_EVENT_CHARS);
    }
    this.#partial[stream] = partial;
  }

  #emitBounded(stream: StreamName, line: string): void {
    for (let at = 0; at < line.length || at === 0; at += MAX_EVENT_CHARS) {
      this.emit(stream, line.slice(at, at + MAX_EVENT_CHARS));
      if (line.length === 0) return;
    }
  }

  flush(): void {
    for (const s of ["stdout", "stderr"] as const) {
      if (this.#partial[s]) this.emit(s, this.#partial[s]);
      this.#partial[s] = "";
    }
  }
}

/**
 * Follows a process's output from the start: backlog first, then live chunks,
 * until it ends. `onLine` gets whole lines; `onMarker` the agent's own notices:
 * a dropped head or gap of a stream, and a stop or kill (after the lines
 * written before it, a partial one included). Resolves when the process has
 * ended and its output is delivered, or when the client went away.
 */
async function follow(
  res: Response,
  manager: ProcessManager,
  pid: string,
  backlogBytes: number,
  onLine: (stream: StreamName, line: string) => void,
  onMarker: (stream: StreamName, marker: string) => void,
): Promise<void> {
  const splitter = new LineSplitter(onLine);
  const live = manager.live(pid);
  if (!live) {
    // Already ended: the files hold everything.
    const out = await manager.describe(pid, backlogBytes);
    splitter.push("stdout", out.stdout);
    splitter.push("stderr", out.stderr);
    splitter.flush();
    return;
  }
  // Rejected only when the agent shuts down; the stream then just ends.
  const ended = manager.waitForExit(pid).catch(() => undefined);
  let replayed = false;
  const early: ([StreamName, Buffer] | string)[] = []; // chunks, and notices, that came while the backlog was read
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  let done!: () => void;
  const outputEnded = new Promise<void>((resolve) => (done = resolve));
  const listener: OutputListener = {
    chunk(stream, data) {
      if (!replayed) early.push([stream, data]);
      else splitter.push(stream, decoders[stream].decode(data, { stream: true }));
    },
    end: () => done(),
    gap: (stream, bytes) => onMarker(stream, `[output dropped: ${bytes} bytes, written faster than followed]\n`),
    notice(text) {
      if (!replayed) return void early.push(text);
      splitter.flush();
      onMarker("stdout", text);
    },
  };
  const { backlog, unsubscribe } = await live.output.subscribe(listener, backlogBytes);
  res.once("close", () => { unsubscribe(); done(); });
  for (const s of ["stdout", "stderr"] as const) {
    const marker = truncationMarker(backlog[s].dropped);
    if (marker) onMarker(s, marker);
    splitter.push(s, decoders[s].decode(backlog[s].data, { stream: true }));
  }
  for (const item of early) {
    if (typeof item !== "string") splitter.push(item[0], decoders[item[0]].decode(item[1], { stream: true }));
    else {
      splitter.flush();
      onMarker("stdout", item);
    }
  }
  replayed = true;
  await outputEnded;
  splitter.flush();
  if (!res.destroyed) await ended;
}

/**
 * Writes to a streamed response with a bound on what waits for a slow reader
 * (#14 item 10): past MAX_BUFFERED_BYTES in the socket, text queues here up to
 * MAX_PENDING_BYTES (a burst from a fast writer still arrives whole); beyond
 * that it is dropped, and once the queue drains the reader gets
 * `notice(bytesDropped)` before the next output. `always` (the final result)
 * is never dropped; `end()` ends the response once the queue is flushed.
 */
function boundedWriter(res: Response, notice: (dropped: number) => string) {
  const pending: string[] = [];
  let pendingBytes = 0;
  let dropped = 0;
  let ending = false;
  let next = 0; // index of the first unsent chunk: no Array.shift over a long queue
  const flush = () => {
    while (next < pending.length && !res.destroyed && res.writableLength <= MAX_BUFFERED_BYTES) {
      const text = pending[next]!;
      pending[next++] = "";
      pendingBytes -= Buffer.byteLength(text);
      res.write(text);
    }
    if (next === pending.length) {
      pending.length = 0;
      next = 0;
      if (ending && !res.destroyed) res.end();
    }
  };
  const queue = (text: string) => {
    // Lines are small: join them into chunks of up to 64 KiB, so the queue holds few strings.
    const last = pending.length - 1;
    if (last >= next && pending[last]!.length + text.length <= MAX_EVENT_CHARS) pending[last] += text;
    else pending.push(text);
    pendingBytes += Buffer.byteLength(text);
  };
  res.on("drain", flush);
  res.once("close", () => {
    pending.length = 0;
    next = 0;
    pendingBytes = 0;
  });
  return {
    write(text: string, always = false): void {
      if (res.destroyed) return;
      const size = Buffer.byteLength(text);
      if (!always && pendingBytes + size > MAX_PENDING_BYTES) {
        dropped += size;
        return;
      }
      if (dropped > 0) {
        queue(notice(dropped));
        dropped = 0;
      }
      queue(text);
      flush();
    },
    end(): void {
      ending = true;
      flush();
    },
  };
}

function keepAlive(res: Response, ms: number, write: () => void): void {
  const timer = setInterval(() => { if (!res.destroyed) write(); }, ms);
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
  const out = boundedWriter(res, (n) => `${JSON.stringify({ type: "dropped", data: `${n} bytes of output dropped: the reader was too slow` })}\n`);
  const send = (event: { type: string; data?: string }) => out.write(`${JSON.stringify(event)}\n`, event.type === "result" || event.type === "error");
  keepAlive(res, EXEC_KEEPALIVE_MS, () => send({ type: "keepalive" }));
  try {
    await follow(res, manager, started.pid, logMaxBytes, (type, data) => send({ type, data }), () => undefined);
    const final = await manager.describe(started.pid, logMaxBytes);
    send({ type: "result", data: JSON.stringify(toProcessResponse(final)) });
  } catch (err) {
    send({ type: "error", data: (err as Error).message });
  }
  out.end();
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
  const out = boundedWriter(res, (n) => `[output dropped: ${n} bytes, the reader was too slow]\n`);
  const write = (text: string) => out.write(text);
  keepAlive(res, LOGS_KEEPALIVE_MS, () => write("[keepalive]\n"));
  try {
    await follow(res, manager, record.pid, logMaxBytes, (s, line) => write(s === "stdout" && isAgentNotice(line) ? `${line}\n` : `${s}:${line}\n`), (_s, marker) => write(marker));
  } catch (err) {
    write(`[error: ${(err as Error).message}]\n`);
  }
  out.end();
}
