/**
 * Case-insensitive search of an ASCII text in undecoded bytes, so a grep
 * without `caseSensitive` builds no string per file (a latin1 copy of every
 * file, then a RegExp over it, cost more than the reads). The semantics are
 * a RegExp's `i` flag on the latin1 view of an ASCII query: only A–Z and a–z
 * fold into each other; a byte ≥ 0x80 never matches an ASCII character.
 *
 * Candidates come from Buffer.indexOf of an "anchor": two adjacent bytes of
 * the query, in each of their cases (at most four spellings), expected
 * rarest in text and code; each candidate is then compared byte by byte.
 * Two bytes rather than one: a one-byte anchor that is common in the text
 * ("k" in a text full of "kappa") costs one call per occurrence, while a
 * pair is skipped over inside the native search.
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

/** Every spelling of `bytes` (already folded) with each letter in either case. */
function spellings(bytes: Uint8Array): Buffer[] {
  let out: number[][] = [[]];
  for (const byte of bytes)
    out = out.flatMap((prefix) =>
      isLetter(byte)
        ? [
            [...prefix, byte],
            [...prefix, byte - 32],
          ]
        : [[...prefix, byte]],
    );
  return out.map((b) => Buffer.from(b));
}

export class CaselessNeedle {
  /** The query's bytes, A–Z folded to a–z. */
  readonly #folded: Uint8Array;
  /** Where the anchor starts in the query. */
  readonly #anchorAt: number;
  /** The anchor's spellings. */
  readonly #anchors: Buffer[];

  /** `query` must be ASCII (non-empty); other queries need a Unicode-aware RegExp. */
  constructor(query: string) {
    const folded = Uint8Array.from(Buffer.from(query, "latin1"), foldAscii);
    this.#folded = folded;
    const width = Math.min(2, folded.length);
    const score = (at: number) => rarity(folded[at]!) + (width > 1 ? rarity(folded[at + 1]!) : 0);
    let best = 0;
    for (let at = 1; at + width <= folded.length; at++) if (score(at) > score(best)) best = at;
    this.#anchorAt = best;
    this.#anchors = spellings(folded.subarray(best, best + width));
    this.#next = new Int32Array(this.#anchors.length);
  }

  /** The window being searched, and the next occurrence of each spelling in it (-2: not searched yet, -1: none left). */
  #hay: Buffer = Buffer.alloc(0);
  readonly #next: Int32Array;

  /** Starts the search of a window (state lives in the needle: one per file, no garbage). */
  begin(hay: Buffer): void {
    this.#hay = hay;
    this.#next.fill(-2);
  }

  /** The offset of the next match at or after `from` in the window begun, or -1; called with increasing offsets. */
  indexFrom(from: number): number {
    const hay = this.#hay;
    const folded = this.#folded;
    const length = folded.length;
    const anchorAt = this.#anchorAt;
    const anchors = this.#anchors;
    const next = this.#next;
    let start = Math.max(0, from);
    search: while (start + length <= hay.length) {
      // Each spelling is searched again only once passed, so it is scanned once per window.
      let candidate = -1;
      for (let c = 0; c < anchors.length; c++) {
        if (next[c] !== -1 && next[c]! < start + anchorAt) next[c] = hay.indexOf(anchors[c]!, start + anchorAt);
        if (next[c]! >= 0 && (candidate < 0 || next[c]! < candidate)) candidate = next[c]!;
      }
      if (candidate < 0) return -1;
      start = candidate - anchorAt;
      if (start + length > hay.length) return -1;
      for (let i = 0; i < length; i++) {
        if (foldAscii(hay[start + i]!) !== folded[i]) {
          start++;
          continue search;
        }
      }
      return start;
    }
    return -1;
  }
}
