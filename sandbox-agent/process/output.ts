import { closeSync, openSync, promises as fsp } from "node:fs";
import { join } from "node:path";
import { isErrno } from "../../src/errors.js";

export type StreamName = "stdout" | "stderr";
export const STREAMS: readonly StreamName[] = ["stdout", "stderr"];

/**
 * A process's output on disk. The child writes `<id>.<stream>.log` itself
 * (O_APPEND), so output keeps being captured while the agent is down, as the
 * reference daemon's does. To bound the size the agent moves the last cap's
 * worth into `<id>.<stream>.old` and truncates the live file (see capLog); a
 * reader sees old + live, cut to the cap, tail kept.
 */
export class LogFiles {
  constructor(
    readonly dir: string,
    readonly id: string,
  ) {}

  live(stream: StreamName): string {
    return join(this.dir, `${this.id}.${stream}.log`);
  }

  old(stream: StreamName): string {
    return join(this.dir, `${this.id}.${stream}.old`);
  }

  /** File descriptors to hand to the child as its stdout and stderr (caller closes them after spawn). */
  openForChild(): { stdout: number; stderr: number } {
    const stdout = openSync(this.live("stdout"), "a");
    try {
      return { stdout, stderr: openSync(this.live("stderr"), "a") };
    } catch (err) {
      closeSync(stdout);
      throw err;
    }
  }

  /**
   * The last `maxBytes` of a stream (old + live). `dropped` counts the bytes
   * lost before it: `droppedBefore` (already discarded by capping) plus what
   * this read cut. `liveLimit` reads the live file only up to that offset.
   */
  async readTail(stream: StreamName, maxBytes: number, droppedBefore = 0, liveLimit?: number): Promise<{ data: Buffer; dropped: number }> {
    const live = await readLast(this.live(stream), maxBytes, liveLimit);
    let data = live.data;
    let dropped = droppedBefore + live.size - live.data.length;
    const room = maxBytes - live.data.length;
    const old = await readLast(this.old(stream), room);
    if (old.size > 0) {
      data = Buffer.concat([old.data, live.data]);
      dropped += old.size - old.data.length;
    }
    if (dropped > 0) {
      // Do not start inside a multi-byte UTF-8 character.
      let skip = 0;
      while (skip < data.length && skip < 3 && (data[skip]! & 0xc0) === 0x80) skip++;
      data = data.subarray(skip);
      dropped += skip;
    }
    return { data, dropped };
  }

  async remove(): Promise<void> {
    await Promise.all(STREAMS.flatMap((s) => [this.live(s), this.old(s)]).map((p) => fsp.rm(p, { force: true })));
  }
}

/** The text a reader sees in front of a stream whose head was dropped. */
export function truncationMarker(dropped: number): string {
  return dropped > 0 ? `[output truncated: ${dropped} earlier bytes dropped]\n` : "";
}

export interface CapResult {
  /** Bytes discarded for good by this capping. */
  dropped: number;
  /** Size of the live file when it was truncated: its last bytes up to here are now the end of the old file. */
  cutAt: number;
}

/**
 * Keeps a live log file (which a child may be appending to) small: once it
 * holds more than `trigger` bytes, the last `keep` bytes of old + live become
 * the new old file and the live file is truncated to zero, so a reader (old +
 * live) still sees at least the last `keep` bytes. The child's O_APPEND
 * writes then start again at offset 0. The tail is read, the size checked
 * once more (bytes written meanwhile are kept) and the file truncated right
 * away; only a write landing between that last check and the truncate (a
 * syscall apart) can be lost — the price of not owning the child's pipe,
 * which is what lets processes outlive the agent.
 */
export async function capLog(livePath: string, oldPath: string, keep: number, trigger = keep): Promise<CapResult | null> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(livePath, "r+");
  } catch (err) {
    if (isErrno(err, "ENOENT")) return null;
    throw err;
  }
  const pooled = scratchBuffers.take(keep);
  const scratch = pooled.subarray(0, keep);
  try {
    let kept: Buffer;
    let cutAt: number;
    try {
      const firstSize = (await fh.stat()).size;
      if (firstSize <= trigger) return null;
      let have = await readFully(fh, scratch.subarray(0, Math.min(firstSize, keep)), Math.max(0, firstSize - keep));
      cutAt = (await fh.stat()).size;
      // A fast writer may have added more meanwhile: take the end of it (at most `keep`), once, and cut.
      const extra = Math.max(0, cutAt - firstSize);
      if (extra >= keep) have = await readFully(fh, scratch, cutAt - keep);
      else if (extra > 0) {
        const retain = Math.min(have, keep - extra);
        scratch.copy(scratch, 0, have - retain, have);
        have = retain + (await readFully(fh, scratch.subarray(retain, retain + extra), firstSize));
      }
      await fh.truncate(0);
      kept = scratch.subarray(0, have);
    } finally {
      await fh.close();
    }
    const previous = await readLast(oldPath, keep - kept.length);
    const tmp = `${oldPath}.tmp`;
    // Written from the scratch buffer as it is (no concatenated copy: a flood caps every 100 ms).
    const out = await fsp.open(tmp, "w");
    try {
      await out.writev([previous.data, kept]);
    } finally {
      await out.close();
    }
    await fsp.rename(tmp, oldPath);
    return { dropped: previous.size - previous.data.length + cutAt - kept.length, cutAt };
  } finally {
    scratchBuffers.give(pooled);
  }
}

/**
 * Buffers capLog reads a log's tail into, reused: a process writing without
 * pause is capped ten times a second, and a fresh buffer each time (garbage
 * the GC is slow to collect, being off its heap) grew the agent by tens of MB.
 * A few are kept; more cappings at once allocate and let theirs go.
 */
const scratchBuffers = {
  free: [] as Buffer[],
  /** A buffer of at least `size` bytes (never a slice of Node's shared pool: it is handed out again whole). */
  take(size: number): Buffer {
    const i = this.free.findIndex((b) => b.length >= size);
    return i === -1 ? Buffer.allocUnsafeSlow(size) : this.free.splice(i, 1)[0]!;
  },
  give(buf: Buffer): void {
    if (this.free.length < 2) this.free.push(buf);
  },
};

/** The last `maxBytes` of a file (up to `limit` if given); a missing file is empty. */
export async function readLast(path: string, maxBytes: number, limit?: number): Promise<{ data: Buffer; size: number }> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(path, "r");
  } catch (err) {
    if (isErrno(err, "ENOENT")) return { data: Buffer.alloc(0), size: 0 };
    throw err;
  }
  try {
    const size = Math.min((await fh.stat()).size, limit ?? Infinity);
    const length = Math.max(0, Math.min(size, maxBytes));
    const data = Buffer.alloc(length);
    const got = await readFully(fh, data, size - length);
    return { data: data.subarray(0, got), size };
  } finally {
    await fh.close();
  }
}

/** Reads `[position, position + buf.length)`; returns the byte count actually read (short at EOF). */
export async function readFully(fh: fsp.FileHandle, buf: Buffer, position: number): Promise<number> {
  let done = 0;
  while (done < buf.length) {
    const { bytesRead } = await fh.read(buf, done, buf.length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}
