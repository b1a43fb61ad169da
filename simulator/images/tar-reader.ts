/**
 * A streaming tar reader (ustar, GNU long names, pax headers), enough for
 * image layers: `docker export`, `docker save`, OCI blobs and mmdebstrap's
 * output. It only parses; what an entry means for a root filesystem is
 * layer.ts. Entries are handed over one at a time with their data as chunks,
 * so a layer of any size is read with bounded memory.
 */

export type EntryType = "file" | "hardlink" | "symlink" | "directory" | "char" | "block" | "fifo" | "other";

export interface TarEntry {
  path: string;
  type: EntryType;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtimeSec: number;
  linkTarget: string;
  /** A device's numbers (an overlay whiteout is the character device 0/0). */
  devMajor: number;
  devMinor: number;
  /** Extended attributes from pax SCHILY.xattr.* records (GNU tar --xattrs), when the archive has any. */
  xattrs?: Record<string, string>;
}

export interface TarSink {
  entry(entry: TarEntry): void;
  data(chunk: Buffer): void;
  end(): void;
}

export class TarFormatError extends Error {}

const BLOCK = 512;
const XATTR = "SCHILY.xattr.";
const TYPES: Record<string, EntryType> = {
  "0": "file",
  "\0": "file",
  "7": "file",
  "1": "hardlink",
  "2": "symlink",
  "5": "directory",
  "3": "char",
  "4": "block",
  "6": "fifo",
};

function text(buf: Buffer, start: number, length: number): string {
  const field = buf.subarray(start, start + length);
  const nul = field.indexOf(0);
  return field.subarray(0, nul === -1 ? length : nul).toString("utf8");
}

/** Octal, or GNU base-256 when the high bit of the first byte is set. */
function number(buf: Buffer, start: number, length: number): number {
  if (buf[start]! & 0x80) {
    let value = buf[start]! & 0x7f;
    for (let i = 1; i < length; i++) value = value * 256 + buf[start + i]!;
    return value;
  }
  const digits = text(buf, start, length).trim();
  return digits ? parseInt(digits, 8) : 0;
}

function checksumOk(header: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
  return sum === number(header, 148, 8);
}

/** pax records: "<length> <key>=<value>\n". */
function paxRecords(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space === -1) break;
    const length = parseInt(data.subarray(at, space).toString("ascii"), 10);
    if (!Number.isFinite(length) || length <= 0) throw new TarFormatError("malformed pax header");
    const record = data.subarray(space + 1, at + length - 1).toString("utf8");
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    at += length;
  }
  return out;
}

/**
 * Feeds a tar stream to a sink. `push` each chunk, then `finish()`; throws
 * TarFormatError on a corrupt or truncated archive.
 */
export class TarReader {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  /** Bytes of the current entry's data still to come, then its padding. */
  private dataLeft = 0;
  private padLeft = 0;
  /** A header whose data is collected whole (pax, GNU long name) instead of streamed. */
  private meta: { kind: string; chunks: Buffer[] } | undefined;
  private pax: Record<string, string> = {};
  private longName: string | undefined;
  private longLink: string | undefined;
  private ended = false;

  constructor(private readonly sink: TarSink) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.ended) {
      if (this.dataLeft > 0) {
        const n = Math.min(this.dataLeft, chunk.length - at);
        const part = chunk.subarray(at, at + n);
        if (this.meta) this.meta.chunks.push(Buffer.from(part));
        else this.sink.data(part);
        this.dataLeft -= n;
        at += n;
        if (this.dataLeft === 0) this.endOfData();
        continue;
      }
      if (this.padLeft > 0) {
        const n = Math.min(this.padLeft, chunk.length - at);
        this.padLeft -= n;
        at += n;
        continue;
      }
      const n = Math.min(BLOCK - this.bufferedBytes, chunk.length - at);
      this.buffered.push(chunk.subarray(at, at + n));
      this.bufferedBytes += n;
      at += n;
      if (this.bufferedBytes === BLOCK) {
        const header = Buffer.concat(this.buffered);
        this.buffered = [];
        this.bufferedBytes = 0;
        this.header(header);
      }
    }
  }

  finish(): void {
    if (this.ended) return;
    if (this.dataLeft > 0 || this.bufferedBytes > 0) throw new TarFormatError("truncated tar archive");
    // Some writers omit the two zero blocks at the end; what was read is complete.
    this.ended = true;
  }

  private header(header: Buffer): void {
    if (header.every((b) => b === 0)) {
      this.ended = true; // end-of-archive marker
      return;
    }
    if (!checksumOk(header)) throw new TarFormatError("tar header checksum mismatch (not a tar archive, or corrupt)");
    const flag = String.fromCharCode(header[156]!);
    const size = number(header, 124, 12);
    if (flag === "x" || flag === "g" || flag === "L" || flag === "K") {
      this.meta = { kind: flag, chunks: [] };
      this.expectData(size);
      return;
    }
    const ustar = text(header, 257, 6) === "ustar";
    const prefix = ustar ? text(header, 345, 155) : "";
    let path = this.pax.path ?? this.longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
    const linkTarget = this.pax.linkpath ?? this.longLink ?? text(header, 157, 100);
    const entry: TarEntry = {
      path,
      type: TYPES[flag] ?? "other",
      size: this.pax.size !== undefined ? Number(this.pax.size) : size,
      mode: number(header, 100, 8) & 0o7777,
      uid: this.pax.uid !== undefined ? Number(this.pax.uid) : number(header, 108, 8),
      gid: this.pax.gid !== undefined ? Number(this.pax.gid) : number(header, 116, 8),
      mtimeSec: this.pax.mtime !== undefined ? Math.floor(Number(this.pax.mtime)) : number(header, 136, 12),
      linkTarget,
      devMajor: number(header, 329, 8),
      devMinor: number(header, 337, 8),
    };
    const xattrs = Object.entries(this.pax).filter(([key]) => key.startsWith(XATTR));
    if (xattrs.length > 0) entry.xattrs = Object.fromEntries(xattrs.map(([key, value]) => [key.slice(XATTR.length), value]));
    if (entry.type === "directory" && path.endsWith("/")) path = path.replace(/\/+$/, "");
    entry.path = path;
    this.pax = {};
    this.longName = undefined;
    this.longLink = undefined;
    // Only regular files carry data; a hard link's size field is 0 (or ignored).
    const dataSize = entry.type === "file" || entry.type === "other" ? entry.size : 0;
    this.sink.entry(entry);
    this.expectData(dataSize);
  }

  private expectData(size: number): void {
    this.dataLeft = size;
    this.padLeft = (BLOCK - (size % BLOCK)) % BLOCK;
    if (size === 0) this.endOfData();
  }

  private endOfData(): void {
    const meta = this.meta;
    if (!meta) {
      this.sink.end();
      return;
    }
    this.meta = undefined;
    const data = Buffer.concat(meta.chunks);
    if (meta.kind === "x") this.pax = paxRecords(data);
    else if (meta.kind === "L") this.longName = text(data, 0, data.length);
    else if (meta.kind === "K") this.longLink = text(data, 0, data.length);
  }
}

/** Reads a whole stream into the reader. */
export async function readTar(stream: AsyncIterable<Buffer | string>, sink: TarSink): Promise<void> {
  const reader = new TarReader(sink);
  for await (const chunk of stream) reader.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  reader.finish();
}
