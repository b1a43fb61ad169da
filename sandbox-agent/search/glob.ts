/**
 * Glob patterns for find, search and grep, compiled to anchored RegExps.
 * Go's filepath.Match syntax (what the reference daemon uses: `*`, `?`,
 * `[a-z]`, `[!x]`/`[^x]`, `\` escapes; `*` matches dotfiles too) plus
 * picomatch-style `{a,b}` alternatives and `**` segments. A pattern without a
 * `/` is matched against the entry's name, one with a `/` against its path
 * relative to the search directory (gitignore-like). Nothing is an invalid
 * pattern: an unclosed `[` or `{` is a literal character.
 */
const REGEX_SPECIAL = /[\\^$.*+?()[\]{}|/-]/g;

function escapeLiteral(text: string): string {
  return text.replace(REGEX_SPECIAL, "\\$&");
}

/** Index of the `]` closing the class opened at `start`, or -1. */
function classEnd(glob: string, start: number): number {
  let i = start + 1;
  if (glob[i] === "!" || glob[i] === "^") i++;
  if (glob[i] === "]") i++; // a leading ] is a member
  for (; i < glob.length; i++) {
    if (glob[i] === "\\") i++;
    else if (glob[i] === "]") return i;
  }
  return -1;
}

function compileClass(body: string): string {
  let negate = false;
  let i = 0;
  if (body[0] === "!" || body[0] === "^") {
    negate = true;
    i = 1;
  }
  let out = "";
  for (; i < body.length; i++) {
    const c = body[i]!;
    if (c === "\\" && i + 1 < body.length) out += `\\${body[++i]}`;
    else if (c === "\\" || c === "^" || c === "[" || c === "]") out += `\\${c}`;
    else out += c;
  }
  return negate ? `[^/${out}]` : `[${out}]`;
}

/** Splits the brace group opened at `start` into its alternatives; undefined when unclosed or without a comma. */
function braceGroup(glob: string, start: number): { alternatives: string[]; end: number } | undefined {
  let depth = 0;
  let from = start + 1;
  const alternatives: string[] = [];
  for (let i = start; i < glob.length; i++) {
    const c = glob[i];
    if (c === "\\") i++;
    else if (c === "{") depth++;
    else if (c === "}") {
      depth--;
      if (depth === 0) {
        alternatives.push(glob.slice(from, i));
        return alternatives.length > 1 ? { alternatives, end: i } : undefined;
      }
    } else if (c === "," && depth === 1) {
      alternatives.push(glob.slice(from, i));
      from = i + 1;
    }
  }
  return undefined;
}

function compileSource(glob: string): string {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    const atSegmentStart = i === 0 || glob[i - 1] === "/";
    if (c === "\\") {
      out += i + 1 < glob.length ? escapeLiteral(glob[++i]!) : "\\\\";
    } else if (c === "*") {
      if (glob[i + 1] === "*" && atSegmentStart && (glob[i + 2] === "/" || i + 2 === glob.length)) {
        // `**/` is zero or more whole segments; a trailing `**` is anything below.
        if (glob[i + 2] === "/") {
          out += "(?:[^/]*/)*";
          i += 2;
        } else {
          out += ".*";
          i += 1;
        }
      } else {
        while (glob[i + 1] === "*") i++;
        out += "[^/]*";
      }
    } else if (c === "?") {
      out += "[^/]";
    } else if (c === "[") {
      const end = classEnd(glob, i);
      if (end < 0) out += "\\[";
      else {
        out += compileClass(glob.slice(i + 1, end));
        i = end;
      }
    } else if (c === "{") {
      const group = braceGroup(glob, i);
      if (!group) out += "\\{";
      else {
        out += `(?:${group.alternatives.map(compileSource).join("|")})`;
        i = group.end;
      }
    } else {
      out += escapeLiteral(c);
    }
  }
  return out;
}

export function globToRegExp(glob: string): RegExp {
  return new RegExp(`^${compileSource(glob)}$`, "s");
}

/** Matches an entry by its name and its path relative to the search directory. */
export type EntryMatcher = (name: string, relPath: string) => boolean;

/** True when `text` uses glob syntax (otherwise it is compared as a plain name). */
export function hasGlobSyntax(text: string): boolean {
  return /[*?[{\\]/.test(text);
}

/**
 * One matcher for a list of patterns: true when any matches. Plain names are
 * compared exactly (a Set lookup), so long exclusion lists stay cheap.
 */
export function compilePatterns(patterns: readonly string[]): EntryMatcher | undefined {
  const names = new Set<string>();
  const suffixes: string[] = [];
  const byName: RegExp[] = [];
  const byPath: RegExp[] = [];
  for (const raw of patterns) {
    const pattern = raw.trim().replace(/^\.\//, "");
    if (!pattern) continue;
    if (pattern.includes("/")) byPath.push(globToRegExp(pattern.replace(/\/+$/, "")));
    else if (/^\*[^*?[{\\]+$/.test(pattern))
      suffixes.push(pattern.slice(1)); // `*.md`: a suffix test, the common case
    else if (hasGlobSyntax(pattern)) byName.push(globToRegExp(pattern));
    else names.add(pattern);
  }
  if (names.size === 0 && suffixes.length === 0 && byName.length === 0 && byPath.length === 0) return undefined;
  // Plain loops: called for every entry of a walk, where closures passed to some() were most of the garbage.
  return (name, relPath) => {
    if (names.size > 0 && names.has(name)) return true;
    for (const suffix of suffixes) if (name.endsWith(suffix)) return true;
    for (const re of byName) if (re.test(name)) return true;
    for (const re of byPath) if (re.test(relPath)) return true;
    return false;
  };
}

/** Splits a comma-separated query value, keeping commas inside `{...}` alternatives. */
export function splitPatternList(value: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === "\\") i++;
    else if (c === "{") depth++;
    else if (c === "}") depth = Math.max(0, depth - 1);
    else if (c === "," && depth === 0) {
      out.push(value.slice(from, i));
      from = i + 1;
    }
  }
  out.push(value.slice(from));
  return out.map((p) => p.trim()).filter(Boolean);
}
