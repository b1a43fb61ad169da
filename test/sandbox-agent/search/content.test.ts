import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CaselessNeedle } from "../../../sandbox-agent/search/caseless.js";
import { ContentSearcher, type ContentMatch } from "../../../sandbox-agent/search/content.js";
import { tempDir } from "../../helpers/agent.js";

/** Every match offset, as the scanner is driven by ContentSearcher (increasing offsets). */
function offsets(query: string, text: Buffer): number[] {
  const needle = new CaselessNeedle(query);
  needle.begin(text);
  const found: number[] = [];
  for (let at = needle.indexFrom(0); at >= 0; at = needle.indexFrom(at + 1)) found.push(at);
  return found;
}

/** The same with a RegExp's `i` flag on the latin1 view: what the case-insensitive search answered before. */
function regexOffsets(query: string, text: Buffer): number[] {
  const re = new RegExp(query.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&"), "gi");
  const latin1 = text.toString("latin1");
  const found: number[] = [];
  for (let from = 0; ;) {
    re.lastIndex = from;
    const m = re.exec(latin1);
    if (!m) return found;
    found.push(m.index);
    from = m.index + 1;
  }
}

describe("CaselessNeedle", () => {
  it("finds what a RegExp with the i flag finds on the latin1 view, overlaps and edges included", () => {
    const cases: [string, string][] = [
      ["needle_marker", "x NEEDLE_MARKER y Needle_Marker needle-marker needle_marke"],
      ["aa", "aAaA a"],
      ["Hello", "hello HELLO hElLo hellø"],
      ["x", "X"],
      ["q(1)", "Q(1) q(2) q(1"],
      ["zz", "naïve ZZ café zz"],
    ];
    for (const [query, text] of cases) expect(offsets(query, Buffer.from(text)), query).toEqual(regexOffsets(query, Buffer.from(text)));
  });

  it("agrees with the RegExp on random bytes, high bytes and every letter case", () => {
    let seed = 7;
    const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const alphabet = Buffer.from("aAbB_ Zz\n\xe9\xc9", "latin1");
    for (let round = 0; round < 200; round++) {
      const text = Buffer.from(Array.from({ length: 200 }, () => alphabet[random(alphabet.length)]!));
      const query = Array.from({ length: 1 + random(3) }, () => "aAbB_ Zz"[random(8)]).join("");
      expect(offsets(query, text), query).toEqual(regexOffsets(query, text));
    }
  });

  it("a byte at or above 0x80 never matches an ASCII letter", () => {
    expect(offsets("k", Buffer.from("\u212a", "utf8"))).toEqual([]); // the Kelvin sign
    expect(offsets("i", Buffer.from("\u0130", "utf8"))).toEqual([]); // I with a dot
  });
});

describe("ContentSearcher reads what the walk saw as a file", () => {
  const search = (host: string, query = "hello", caseSensitive = false) => {
    const out: ContentMatch[] = [];
    new ContentSearcher({ query, caseSensitive, regex: false, contextLines: 0 }).searchFile(host, "f", out, 100, () => true);
    return out;
  };

  it("a file larger than the first read is read whole: lines numbered, matches at both ends", () => {
    const dir = tempDir("search-content-");
    const filler = "filler line\n".repeat(30_000); // 360 kB: beyond the first 64 KiB read, within one window
    writeFileSync(join(dir, "mid.txt"), `Hello first\n${filler}last HELLO\n`);
    expect(search(join(dir, "mid.txt")).map((m) => [m.line, m.column, m.text])).toEqual([
      [1, 1, "Hello first"],
      [30_002, 6, "last HELLO"],
    ]);
  });

  it("binary means a NUL in the first 8,000 bytes, also for a file larger than the first read", () => {
    const dir = tempDir("search-content-");
    const text = "hello\n".repeat(40_000);
    writeFileSync(join(dir, "binary.dat"), Buffer.concat([Buffer.from("hello\n\0"), Buffer.from(text)]));
    writeFileSync(join(dir, "late-nul.txt"), Buffer.concat([Buffer.from("x".repeat(9000)), Buffer.from("\0\nhello\n")]));
    writeFileSync(join(dir, "small.dat"), "hello\0");
    expect(search(join(dir, "binary.dat"))).toEqual([]);
    expect(search(join(dir, "small.dat"))).toEqual([]);
    expect(search(join(dir, "late-nul.txt")).map((m) => m.line)).toEqual([2]);
  });

  it("a directory or a FIFO in a file's place is skipped, never read as one, and fails nothing", () => {
    const dir = tempDir("search-content-");
    mkdirSync(join(dir, "swapped"));
    expect(search(join(dir, "swapped"))).toEqual([]);
    if (spawnSync("mkfifo", [join(dir, "pipe")]).status === 0) expect(search(join(dir, "pipe"))).toEqual([]);
    expect(search(join(dir, "missing"))).toEqual([]);
    writeFileSync(join(dir, "empty"), "");
    expect(search(join(dir, "empty"))).toEqual([]);
  });
});
