/**
 * Case-insensitive search of an ASCII text in undecoded bytes, so a grep
 * without `caseSensitive` builds no string per file (a latin1 copy of every
 * file, then a RegExp over it, cost more than the reads). The semantics are
 * a RegExp's `i` flag on the latin1 view of an ASCII query: only A–Z and a–z
 * fold into each other; a byte ≥ 0x80 never matches an ASCII character.
 *
 * Candidates come from Buffer.indexOf (memchr) of one "anchor" byte of the
 * query, both of its cases for a letter; each candidate is then compared
 * byte by byte. The anchor is the query byte expected rarest in text and
 * source code, so few candidates need comparing.
 */

/** Bytes roughly from most to least frequent in text and code (letters count both cases); any byte not listed is rarer still. */
const COMMON_FIRST = " etaoinsrlhcdumpfg.y()bw,=_;\"'vk/:-{}0123456789x<>[]#*jqz";

function rarity(byte: number): number {
  const at = COMMON_FIRST.indexOf(String.fromCharCode(foldAscii(byte)));
  return at < 0 ? COMMON_FIRST.length : at;
}

function foldAscii(byte: number): number {
  return byte >= 65 && byte <= 90 ? byte + 32 : byte;
}

function isLetter(byte: number): boolean {
  const folded = foldAscii(byte);
  return folded >= 97 && folded <= 122;
}

export class CaselessNeedle {
  /** The query's bytes, A–Z folded to a–z. */
  readonly #folded: Uint8Array;
  /** Where the anchor byte sits in the query. */
  readonly #anchorAt: number;
  /** The anchor's byte values: one, or the lower and upper case of a letter. */
  readonly #anchors: number[];

  /** `query` must be ASCII (non-empty); other queries need a Unicode-aware RegExp. */
  constructor(query: string) {
    this.#folded = Uint8Array.from(Buffer.from(query, "latin1"), foldAscii);
    let best = 0;
    for (let i = 1; i < this.#folded.length; i++) if (rarity(this.#folded[i]!) > rarity(this.#folded[best]!)) best = i;
    this.#anchorAt = best;
    const anchor = this.#folded[best]!;
    this.#anchors = isLetter(anchor) ? [anchor, anchor - 32] : [anchor];
  }

  /** A function giving the offset of the next match at or after an offset (called with increasing offsets), or -1. */
  scanner(hay: Buffer): (from: number) => number {
    const folded = this.#folded;
    const length = folded.length;
    const anchorAt = this.#anchorAt;
    const anchors = this.#anchors;
    // The next occurrence of each anchor case; re-searched only once passed, so each case is scanned once per window.
    const next = anchors.map(() => -2);
    const matchesAt = (start: number): boolean => {
      for (let i = 0; i < length; i++) if (foldAscii(hay[start + i]!) !== folded[i]) return false;
      return true;
    };
    return (from) => {
      let start = Math.max(0, from);
      while (start + length <= hay.length) {
        let candidate = -1;
        for (let c = 0; c < anchors.length; c++) {
          if (next[c] !== -1 && next[c]! < start + anchorAt) next[c] = hay.indexOf(anchors[c]!, start + anchorAt);
          if (next[c]! >= 0 && (candidate < 0 || next[c]! < candidate)) candidate = next[c]!;
        }
        if (candidate < 0) return -1;
        start = candidate - anchorAt;
        if (start + length > hay.length) return -1;
        if (matchesAt(start)) return start;
        start++;
      }
      return -1;
    };
  }
}
