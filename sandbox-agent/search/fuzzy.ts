/**
 * Fuzzy matching of a pattern against paths, scored the way fzf's v2
 * algorithm scores (the reference daemon uses fzf's FuzzyMatchV2): every
 * pattern character must occur in order, case-insensitively; a match earns
 * 16 per character, more at word boundaries (after `/`, `_`, `-`, `.`, a
 * space, or a lower→upper or letter→digit change) and for consecutive runs,
 * and pays for gaps (-3 to open, -1 to extend). The first character's bonus
 * counts double. Higher is better.
 */
const SCORE_MATCH = 16;
const GAP_START = -3;
const GAP_EXTENSION = -1;
const BONUS_BOUNDARY = SCORE_MATCH / 2;
const BONUS_BOUNDARY_WHITE = BONUS_BOUNDARY + 2;
const BONUS_BOUNDARY_DELIMITER = BONUS_BOUNDARY + 1;
const BONUS_NON_WORD = SCORE_MATCH / 2;
const BONUS_CAMEL = BONUS_BOUNDARY + GAP_EXTENSION;
const BONUS_CONSECUTIVE = -(GAP_START + GAP_EXTENSION);
const FIRST_CHAR_MULTIPLIER = 2;

const enum CharClass {
  White,
  NonWord,
  Delimiter,
  Lower,
  Upper,
  Letter,
  Number,
}

function classOf(code: number): CharClass {
  if (code >= 97 && code <= 122) return CharClass.Lower;
  if (code >= 65 && code <= 90) return CharClass.Upper;
  if (code >= 48 && code <= 57) return CharClass.Number;
  if (code === 32 || code === 9 || code === 10 || code === 13) return CharClass.White;
  if (code === 47 || code === 44 || code === 58 || code === 59 || code === 124) return CharClass.Delimiter; // / , : ; |
  if (code > 127) return CharClass.Letter;
  return CharClass.NonWord;
}

function bonusFor(prev: CharClass, current: CharClass): number {
  if (current > CharClass.Delimiter) {
    if (prev === CharClass.White) return BONUS_BOUNDARY_WHITE;
    if (prev === CharClass.Delimiter) return BONUS_BOUNDARY_DELIMITER;
    if (prev === CharClass.NonWord) return BONUS_BOUNDARY;
  }
  if ((prev === CharClass.Lower && current === CharClass.Upper) || (prev !== CharClass.Number && current === CharClass.Number)) return BONUS_CAMEL;
  if (current === CharClass.NonWord || current === CharClass.Delimiter) return BONUS_NON_WORD;
  if (current === CharClass.White) return BONUS_BOUNDARY_WHITE;
  return 0;
}

const NONE = -1e9;

export class FuzzyMatcher {
  readonly #pattern: string;
  #bonus = new Int16Array(256);
  #row = new Float64Array(256);
  #prevRow = new Float64Array(256);
  /** The bonus of the first character of the consecutive run ending at each cell (fzf carries it along the run). */
  #run = new Int16Array(256);
  #prevRun = new Int16Array(256);

  /** The pattern's characters and their upper case when ASCII (undefined when the pattern is not all ASCII). */
  readonly #asciiCodes?: { lower: number[]; upper: number[] };

  /** `pattern` is matched case-insensitively; surrounding whitespace is ignored. */
  constructor(pattern: string) {
    this.#pattern = pattern.trim().toLowerCase();
    if (/^[\x00-\x7f]*$/.test(this.#pattern)) {
      const lower = [...this.#pattern].map((c) => c.charCodeAt(0));
      this.#asciiCodes = { lower, upper: lower.map((c) => (c >= 97 && c <= 122 ? c - 32 : c)) };
    }
  }

  /**
   * False when an ASCII `text` lacks the pattern's characters in order: the
   * rejection of most paths, without the lower-cased copy of each one. True
   * when they are there, or when either is not ASCII (the exact test decides).
   */
  #mayMatch(text: string): boolean {
    const codes = this.#asciiCodes;
    if (!codes) return true;
    let j = 0;
    for (let i = 0; i < codes.lower.length; i++) {
      const lower = codes.lower[i]!;
      const upper = codes.upper[i]!;
      for (;;) {
        if (j >= text.length) return false;
        const c = text.charCodeAt(j++);
        if (c === lower || c === upper) break;
        if (c > 127) return true;
      }
    }
    return true;
  }

  /** The score of `text`, or undefined when it does not contain the pattern's characters in order. */
  score(text: string): number | undefined {
    const pattern = this.#pattern;
    const m = pattern.length;
    if (m === 0) return 0;
    if (!this.#mayMatch(text)) return undefined;
    const lower = text.toLowerCase();
    // The exact in-order test, on the lower-cased text (what decides for non-ASCII text).
    let at = -1;
    for (let i = 0; i < m; i++) {
      at = lower.indexOf(pattern[i]!, at + 1);
      if (at < 0) return undefined;
    }
    const n = text.length;
    if (this.#bonus.length < n) {
      const size = Math.max(n, this.#bonus.length * 2);
      this.#bonus = new Int16Array(size);
      this.#row = new Float64Array(size);
      this.#prevRow = new Float64Array(size);
      this.#run = new Int16Array(size);
      this.#prevRun = new Int16Array(size);
    }
    const bonus = this.#bonus;
    let prevClass = CharClass.White;
    for (let j = 0; j < n; j++) {
      const cls = classOf(text.charCodeAt(j));
      bonus[j] = bonusFor(prevClass, cls);
      prevClass = cls;
    }
    let prev = this.#prevRow;
    let row = this.#row;
    let prevRun = this.#prevRun;
    let run = this.#run;
    // Row i holds the best score with pattern[i] matched at text[j].
    for (let i = 0; i < m; i++) {
      const pc = pattern.charCodeAt(i);
      let gap = NONE; // best prev[k] + gap penalties for k < j - 1
      for (let j = 0; j < n; j++) {
        let best = NONE;
        let runBonus = 0;
        if (lower.charCodeAt(j) === pc) {
          const b = bonus[j]!;
          if (i === 0) {
            best = SCORE_MATCH + b * FIRST_CHAR_MULTIPLIER;
            runBonus = b;
          } else if (j > 0) {
            // Inside a consecutive run every character earns at least the run's first bonus.
            const first = prevRun[j - 1]!;
            const consecutive = prev[j - 1]! > NONE ? prev[j - 1]! + SCORE_MATCH + Math.max(b, first, BONUS_CONSECUTIVE) : NONE;
            const gapped = gap > NONE ? gap + SCORE_MATCH + b : NONE;
            if (consecutive >= gapped && consecutive > NONE) {
              best = consecutive;
              runBonus = b >= BONUS_BOUNDARY && b > first ? b : first;
            } else {
              best = gapped;
              runBonus = b;
            }
          }
        }
        run[j] = runBonus;
        if (i > 0 && j > 0) gap = Math.max(gap > NONE ? gap + GAP_EXTENSION : NONE, prev[j - 1]! > NONE ? prev[j - 1]! + GAP_START : NONE);
        row[j] = best;
      }
      [prev, row] = [row, prev];
      [prevRun, run] = [run, prevRun];
    }
    let result = NONE;
    for (let j = 0; j < n; j++) if (prev[j]! > result) result = prev[j]!;
    return result > NONE ? result : undefined;
  }
}
