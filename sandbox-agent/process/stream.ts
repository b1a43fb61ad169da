import type { Request, Response } from "express";
import type { ProcessManager, StartProcessRequest } from "./manager.js";
import { truncationMarker, type StreamName } from "./output.js";
import type { OutputListener } from "./live-output.js";
import { toProcessResponse } from "./response.js";

const EXEC_KEEPALIVE_MS = 5_000; // reference: NDJSON keepalive event every 5 s
const LOGS_KEEPALIVE_MS = 30_000; // reference: "[keepalive]" line every 30 s

/** Splits chunks into whole lines per stream; a partial line waits for its end (or for flush). */
class LineSplitter {
  readonly #partial: Record<StreamName, string> = { stdout: "", stderr: "" };
  constructor(private readonly emit: (stream: StreamName, line: string) => void) {}

  push(stream: StreamName, text: string): void {
    const lines = (this.#partial[stream] + text).split("\n");
    this.#partial[stream] = lines.pop()!;
    for (const line of lines) this.emit(stream, line);
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
 * until it ends. `onLine` gets whole lines; `onMarker` the truncation notice
 * when the head of a stream was dropped. Resolves when the process has ended
 * and its output is delivered, or when the client went away.
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
  const early: [StreamName, Buffer][] = [];
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  let done!: () => void;
  const outputEnded = new Promise<void>((resolve) => (done = resolve));
  const listener: OutputListener = {
    chunk(stream, data) {
      if (!replayed) early.push([stream, data]);
      else splitter.push(stream, decoders[stream].decode(data, { stream: true }));
    },
    end: () => done(),
  };
  const { backlog, unsubscribe } = await live.output.subscribe(listener, backlogBytes);
  res.once("close", () => { unsubscribe(); done(); });
  for (const s of ["stdout", "stderr"] as const) {
    const marker = truncationMarker(backlog[s].dropped);
    if (marker) onMarker(s, marker);
    splitter.push(s, decoders[s].decode(backlog[s].data, { stream: true }));
  }
  for (const [s, data] of early) splitter.push(s, decoders[s].decode(data, { stream: true }));
  replayed = true;
  await outputEnded;
  splitter.flush();
  if (!res.destroyed) await ended;
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
  const send = (event: { type: string; data?: string }) => { if (!res.destroyed) res.write(`${JSON.stringify(event)}\n`); };
  keepAlive(res, EXEC_KEEPALIVE_MS, () => send({ type: "keepalive" }));
  try {
    await follow(res, manager, started.pid, logMaxBytes, (type, data) => send({ type, data }), () => undefined);
    const final = await manager.describe(started.pid, logMaxBytes);
    send({ type: "result", data: JSON.stringify(toProcessResponse(final)) });
  } catch (err) {
    send({ type: "error", data: (err as Error).message });
  }
  res.end();
}

/** Lines the agent itself adds to a process's stdout (restart notices): raw in the log stream, as the reference writes them. */
function isAgentNotice(line: string): boolean {
  return /^\[(Process failed with exit code -?\d+\. Attempting restart \d+\/(\d+|unlimited)\.\.\.|Failed to restart process: .*)\]$/.test(line);
}

/**
 * GET /process/{id}/logs/stream: text/plain, one `stdout:`/`stderr:` prefixed
 * line per output line (the reference prefixes per chunk), backlog then live,
 * ending when the process has ended. Unlike the reference, an unknown id is a
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
  const write = (text: string) => { if (!res.destroyed) res.write(text); };
  keepAlive(res, LOGS_KEEPALIVE_MS, () => write("[keepalive]\n"));
  try {
    await follow(res, manager, record.pid, logMaxBytes, (s, line) => write(s === "stdout" && isAgentNotice(line) ? `${line}\n` : `${s}:${line}\n`), (_s, marker) => write(marker));
  } catch (err) {
    write(`[error: ${(err as Error).message}]\n`);
  }
  res.end();
}
