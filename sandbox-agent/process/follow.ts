import type { Response } from "express";
import type { OutputListener } from "./live-output.js";
import type { ProcessManager } from "./manager.js";
import { truncationMarker, type StreamName } from "./output.js";

/** The longest line sent as one event; a longer one (400 MB without a newline) goes out in pieces of this size. */
export const MAX_EVENT_CHARS = 64 * 1024;
/** Bytes a reader may have waiting in the socket before the follower stops producing for it. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;
/**
 * Live output a follower holds for a reader that is behind (raw bytes, as read from the log files). Past it
 * the follower takes nothing more (the agent does not even read the files for it) and the reader later gets
 * a `dropped` notice for what it missed: memory stays bounded whatever the reader does, and the process,
 * which writes to files, is never slowed by it (the reference keeps 1 MiB per subscriber, then a marker).
 */
export const MAX_HELD_BYTES = 2 * 1024 * 1024;
/** Output is turned into lines this much at a time, each piece sent once the socket has room for it. */
const SLICE_BYTES = 64 * 1024;

export type DropReason = "slow-reader" | "fast-writer";

/** What a follow reports to the route that formats it. */
export interface FollowSink {
  line(stream: StreamName, line: string): void;
  /** The agent's own notices: a stream's dropped head, a stop or kill (after the lines before it). */
  marker(stream: StreamName, text: string): void;
  /** Bytes of a stream that never reached this reader. */
  dropped(stream: StreamName, bytes: number, reason: DropReason): void;
  /** Sends what line/marker/dropped produced since the last flush, as one write. */
  flush(): void;
}

/** Splits chunks into whole lines per stream; a partial line waits for its end (or for flush), up to MAX_EVENT_CHARS. */
class LineSplitter {
  readonly #partial: Record<StreamName, string> = { stdout: "", stderr: "" };
  constructor(private readonly emit: (stream: StreamName, line: string) => void) {}

  push(stream: StreamName, text: string): void {
    let from = 0;
    let partial = this.#partial[stream];
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", from)) {
      this.#emitBounded(stream, partial + text.slice(from, nl));
      partial = "";
      from = nl + 1;
    }
    partial += text.slice(from);
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

  flushStream(stream: StreamName): void {
    if (this.#partial[stream]) this.emit(stream, this.#partial[stream]);
    this.#partial[stream] = "";
  }

  flush(): void {
    for (const s of ["stdout", "stderr"] as const) this.flushStream(s);
  }
}

type Item =
  | { kind: "data"; stream: StreamName; data: Buffer; backlog: boolean }
  | { kind: "drop"; stream: StreamName; bytes: number; reason: DropReason }
  | { kind: "notice"; stream: StreamName; text: string };

/** The output a follower has taken and not yet turned into lines, in order; live bytes bounded by MAX_HELD_BYTES. */
class Inbox {
  readonly #items: Item[] = [];
  #head = 0;
  liveBytes = 0;
  closed = false;
  #wake: (() => void) | undefined;

  push(item: Item): void {
    const last = this.#items[this.#items.length - 1];
    if (item.kind === "drop" && this.#items.length > this.#head && last?.kind === "drop" && last.stream === item.stream && last.reason === item.reason) {
      last.bytes += item.bytes; // a long stall is one notice, not one per tick
    } else this.#items.push(item);
    if (item.kind === "data" && !item.backlog) this.liveBytes += item.data.length;
    this.#notify();
  }

  /** Puts the backlog in front of whatever live output came in while it was read. */
  prepend(items: Item[]): void {
    this.#items.splice(this.#head, 0, ...items);
    this.#notify();
  }

  shift(): Item | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head++]!;
    if (this.#head === this.#items.length) {
      this.#items.length = 0;
      this.#head = 0;
    }
    if (item.kind === "data" && !item.backlog) this.liveBytes -= item.data.length;
    return item;
  }

  close(): void {
    this.closed = true;
    this.#notify();
  }

  next(): Promise<void> {
    return new Promise((resolve) => (this.#wake = resolve));
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/** Resolves once the socket has room for more (at once if it has), or the client is gone. */
function room(res: Response): Promise<void> | undefined {
  if (res.destroyed || res.writableLength <= MAX_BUFFERED_BYTES) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/**
 * Follows a process's output from the start, backlog first, then live, until
 * it ends, turning it into lines only as fast as the reader takes them: a
 * reader that stops reading costs the agent at most MAX_HELD_BYTES of output
 * plus MAX_BUFFERED_BYTES in the socket, and no work (LiveOutput reads the
 * files for ready followers only). Resolves when the process has ended and
 * its output is delivered, or when the client went away.
 */
export async function follow(res: Response, manager: ProcessManager, pid: string, backlogBytes: number, sink: FollowSink): Promise<void> {
  const inbox = new Inbox();
  const live = manager.live(pid);
  let ended: Promise<unknown> = Promise.resolve();
  let unsubscribe = () => {};
  if (!live) {
    // Already ended: the files hold everything.
    const out = await manager.describe(pid, backlogBytes);
    inbox.push({ kind: "data", stream: "stdout", data: Buffer.from(out.stdout), backlog: true });
    inbox.push({ kind: "data", stream: "stderr", data: Buffer.from(out.stderr), backlog: true });
    inbox.close();
  } else {
    // Rejected only when the agent shuts down; the stream then just ends.
    ended = manager.waitForExit(pid).catch(() => undefined);
    const listener: OutputListener = {
      ready: () => inbox.liveBytes < MAX_HELD_BYTES,
      chunk: (stream, data) => {
        if (inbox.liveBytes < MAX_HELD_BYTES) inbox.push({ kind: "data", stream, data, backlog: false });
        else inbox.push({ kind: "drop", stream, bytes: data.length, reason: "slow-reader" });
      },
      skipped: (stream, bytes, why) => inbox.push({ kind: "drop", stream, bytes, reason: why === "not-ready" ? "slow-reader" : "fast-writer" }),
      notice: (text) => inbox.push({ kind: "notice", stream: "stdout", text }),
      end: () => inbox.close(),
    };
    const subscribed = await live.output.subscribe(listener, backlogBytes);
    unsubscribe = subscribed.unsubscribe;
    const head: Item[] = [];
    for (const s of ["stdout", "stderr"] as const) {
      const marker = truncationMarker(subscribed.backlog[s].dropped);
      if (marker) head.push({ kind: "notice", stream: s, text: marker });
      head.push({ kind: "data", stream: s, data: subscribed.backlog[s].data, backlog: true });
    }
    inbox.prepend(head);
  }
  const gone = () => {
    unsubscribe();
    inbox.close();
  };
  res.once("close", gone);
  try {
    await drain(res, inbox, sink);
  } finally {
    res.off("close", gone);
    unsubscribe();
  }
  if (!res.destroyed) await ended;
}

/** Turns the inbox into lines for the sink, a slice at a time, each once the socket has room. */
async function drain(res: Response, inbox: Inbox, sink: FollowSink): Promise<void> {
  const splitter = new LineSplitter((stream, line) => sink.line(stream, line));
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  for (;;) {
    if (res.destroyed) return;
    const item = inbox.shift();
    if (!item) {
      if (inbox.closed) break;
      sink.flush();
      await inbox.next();
      continue;
    }
    if (item.kind === "notice") {
      splitter.flush();
      sink.marker(item.stream, item.text);
    } else if (item.kind === "drop") {
      // The cut line is sent as it is; what follows starts afresh (no half character carried over).
      splitter.flushStream(item.stream);
      decoders[item.stream] = new TextDecoder();
      sink.dropped(item.stream, item.bytes, item.reason);
    } else {
      for (let at = 0; at < item.data.length; at += SLICE_BYTES) {
        const wait = room(res);
        if (wait) {
          sink.flush();
          await wait;
          if (res.destroyed) return;
        }
        splitter.push(item.stream, decoders[item.stream].decode(item.data.subarray(at, at + SLICE_BYTES), { stream: true }));
        sink.flush();
      }
    }
  }
  splitter.flush();
  sink.flush();
}
