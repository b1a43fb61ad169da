import { closeSync, constants, fstatSync, openSync, readlinkSync, readSync } from "node:fs";
import { CaselessNeedle } from "./caseless.js";

export interface ContentMatch {
  path: string;
  line: number;
  column: number;
  text: string;
  context?: string;
}

export interface ContentQuery {
  query: string;
  caseSensitive: boolean;
  regex: boolean;
  contextLines: number;
}

/** Bytes read at once; a larger file is searched window by window, cut at line ends. */
export const WINDOW_BYTES = 8 * 1024 * 1024;
/** A line is returned up to this many bytes (then "…"), so a minified file cannot balloon a response. */
export const MAX_LINE_BYTES = 4096;
/** A file with a NUL byte in its first bytes is binary and skipped, as grep and git decide it. */
const BINARY_PROBE_BYTES = 8000;
const NEWLINE = 10;

/**
 * Searches files for a text or a regular expression, one match per line.
 * Bytes are scanned undecoded where possible: a literal case-sensitive query
 * is a Buffer.indexOf over the file, a literal ASCII one in any case a
 * CaselessNeedle; anything else runs a RegExp over the latin1 view (one char
 * per byte, so columns are byte offsets as in the reference daemon) unless
 * the query itself is non-ASCII, which needs UTF-8.
 * Matched lines are decoded as UTF-8 for the response.
 */
export class ContentSearcher {
  readonly #caseless?: CaselessNeedle;
  readonly #regex?: RegExp;
  readonly #utf8: boolean;
  readonly #context: number;
  #buffer = Buffer.allocUnsafe(64 * 1024);
  /** The window a literal query is searched in, and its scanner, made once: most files never match, and cost no garbage. */
  #window: Buffer = this.#buffer;
  readonly #literalScanner?: (from: number) => number;

  constructor(q: ContentQuery) {
    this.#context = q.contextLines;
    const ascii = /^[\x00-\x7f]*$/.test(q.query);
    this.#utf8 = !ascii;
    if (!q.regex && q.caseSensitive) {
      const needle = Buffer.from(q.query, "utf8");
      this.#literalScanner = (from) => this.#window.indexOf(needle, from);
    } else if (!q.regex && ascii) {
      const caseless = new CaselessNeedle(q.query);
      this.#caseless = caseless;
      this.#literalScanner = (from) => caseless.indexFrom(from);
    } else {
      const source = q.regex ? q.query : q.query.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
      this.#regex = new RegExp(source, `gm${q.caseSensitive ? "" : "i"}${this.#utf8 ? "u" : ""}`);
    }
  }

  /**
   * Searches one file; pushes matches into `out` until it holds `limit`.
   * `insideRoot` vets the real path of a file that matched (a directory
   * swapped for a symlink during the walk must not expose what lies outside
   * the root). Unreadable files are skipped, as the reference does.
   *
   * Most files fit the buffer: they cost open, one read and close (grep
   * spends five calls). A read shorter than asked is the end of a regular
   * file; whether it is one (the walk saw a regular file, but it may have
   * been swapped since) is asked of fstat only once it matched, or when a
   * read fills the buffer and the size decides the windows.
   */
  searchFile(host: string, rel: string, out: ContentMatch[], limit: number, insideRoot: (real: string) => boolean): void {
    let fd: number;
    try {
      fd = openSync(host, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      return;
    }
    try {
      this.#searchOpen(fd, rel, out, limit, insideRoot);
    } catch (err) {
      // A read that fails (a directory or a FIFO swapped in, an I/O error) skips the file like an unreadable one.
      if (typeof (err as NodeJS.ErrnoException).code !== "string") throw err;
    } finally {
      closeSync(fd);
    }
  }

  #searchOpen(fd: number, rel: string, out: ContentMatch[], limit: number, insideRoot: (real: string) => boolean): void {
    let size = -1; // unknown (and the file's type unchecked) until a read fills the buffer or a line matches
    let position = 0;
    let carry = 0;
    let firstLine = 1;
    let vetted = false;
    let probed = false;
    for (;;) {
      const buf = this.#buffer;
      const read = readSync(fd, buf, carry, buf.length - carry, position);
      position += read;
      const filled = carry + read;
      if (filled === 0) return;
      if (size < 0 && read === buf.length - carry) {
        size = searchableSize(fd);
        if (size < 0) return;
        if (buf.length < Math.min(WINDOW_BYTES, size)) {
          // Grow the buffer to hold the whole file (up to a window) and read the rest before searching.
          this.#buffer = Buffer.allocUnsafe(Math.min(WINDOW_BYTES, Math.max(size, buf.length * 2)));
          buf.copy(this.#buffer, 0, 0, filled);
          carry = filled;
          continue;
        }
      }
      // (size < 0 here means the read was short: the whole file is in the buffer.)
      const atEnd = size < 0 || read < buf.length - carry || position >= size;
      // Cut at the last newline so no line is split across windows (unless one line fills the window).
      let end = filled;
      if (!atEnd) {
        const lastNewline = buf.lastIndexOf(NEWLINE, filled - 1);
        if (lastNewline >= 0) end = lastNewline + 1;
      }
      const window = buf.subarray(0, end);
      if (!probed) {
        probed = true;
        const probeEnd = Math.min(filled, BINARY_PROBE_BYTES);
        if ((window.length === probeEnd ? window : buf.subarray(0, probeEnd)).includes(0)) return;
      }
      const next = this.#scanner(window);
      const first = next(0);
      if (first >= 0) {
        if (!vetted) {
          if ((size < 0 && searchableSize(fd) < 0) || !insideRoot(realPathOf(fd))) return;
          vetted = true;
        }
        this.#collect(window, next, first, firstLine, rel, out, limit);
        if (out.length >= limit) return;
      }
      if (atEnd) return;
      firstLine += countNewlines(window);
      carry = filled - end;
      buf.copy(buf, 0, end, filled);
    }
  }

  /** A function giving the byte offset of the next match at or after a byte offset (called with increasing offsets), or -1. */
  #scanner(window: Buffer): (from: number) => number {
    if (this.#literalScanner) {
      this.#window = window;
      this.#caseless?.begin(window);
      return this.#literalScanner;
    }
    const re = this.#regex!;
    if (!this.#utf8) {
      const text = window.toString("latin1");
      return (from) => {
        re.lastIndex = from;
        const m = re.exec(text);
        return m ? m.index : -1;
      };
    }
    // UTF-8: keep one (byte, char) pair in step, offsets only grow.
    const text = window.toString("utf8");
    let byte = 0;
    let char = 0;
    return (from) => {
      char += window.toString("utf8", byte, from).length;
      byte = from;
      re.lastIndex = char;
      const m = re.exec(text);
      if (!m) return -1;
      byte += Buffer.byteLength(text.slice(char, m.index), "utf8");
      char = m.index;
      return byte;
    };
  }

  #collect(window: Buffer, next: (from: number) => number, first: number, firstLine: number, rel: string, out: ContentMatch[], limit: number): void {
    let line = firstLine;
    let counted = 0; // the newlines before `counted` are included in `line`
    let at = first;
    while (at >= 0 && out.length < limit) {
      const start = at > 0 ? window.lastIndexOf(NEWLINE, at - 1) + 1 : 0;
      line += countNewlines(window.subarray(counted, start));
      counted = start;
      let end = window.indexOf(NEWLINE, at);
      if (end < 0) end = window.length;
      const match: ContentMatch = { path: rel, line, column: at - start + 1, text: lineText(window, start, end) };
      if (this.#context > 0) match.context = this.#contextOf(window, start, end);
      out.push(match);
      at = end + 1 < window.length ? next(end + 1) : -1;
    }
  }

  /** The matched line with up to `contextLines` lines before and after it, joined by "\n" (grep -C). */
  #contextOf(window: Buffer, start: number, end: number): string {
    let from = start;
    // (Buffer.lastIndexOf with a negative offset counts from the end: guard it.)
    for (let i = 0; i < this.#context && from > 0; i++) from = from >= 2 ? window.lastIndexOf(NEWLINE, from - 2) + 1 : 0;
    let to = end;
    for (let i = 0; i < this.#context && to < window.length - 1; i++) {
      const next = window.indexOf(NEWLINE, to + 1);
      to = next < 0 ? window.length : next;
    }
    const lines: string[] = [];
    for (let s = from; ;) {
      let e = window.indexOf(NEWLINE, s);
      if (e < 0 || e > to) e = Math.min(to, window.length);
      lines.push(lineText(window, s, e));
      if (e >= to) break;
      s = e + 1;
    }
    return lines.join("\n");
  }
}

function lineText(window: Buffer, start: number, end: number): string {
  if (end - start <= MAX_LINE_BYTES) return window.toString("utf8", start, end);
  return `${window.toString("utf8", start, start + MAX_LINE_BYTES)}…`;
}

function countNewlines(bytes: Buffer): number {
  let n = 0;
  for (let i = bytes.indexOf(NEWLINE); i >= 0; i = bytes.indexOf(NEWLINE, i + 1)) n++;
  return n;
}

/**
 * The size of an open file when it is a regular, non-empty file, else -1:
 * grep reads regular files only, and a regular file of size 0 that still
 * reads bytes is a kernel pseudo-file (procfs).
 */
function searchableSize(fd: number): number {
  const stat = fstatSync(fd);
  return stat.isFile() && stat.size > 0 ? stat.size : -1;
}

function realPathOf(fd: number): string {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return "";
  }
}
