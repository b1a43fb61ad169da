import { describe, expect, it } from "vitest";
import { compilePatterns, globToRegExp, splitPatternList } from "../../../sandbox-agent/search/glob.js";
import { FuzzyMatcher } from "../../../sandbox-agent/search/fuzzy.js";

describe("globToRegExp (Go filepath.Match plus braces and **)", () => {
  const matches = (glob: string, text: string) => globToRegExp(glob).test(text);
  it("* and ? stay within a name and match dotfiles, as Go's Match does", () => {
    expect(matches("*.go", "main.go")).toBe(true);
    expect(matches("*.go", ".hidden.go")).toBe(true);
    expect(matches("*.go", "a/main.go")).toBe(false);
    expect(matches("?.ts", "a.ts")).toBe(true);
    expect(matches("?.ts", "ab.ts")).toBe(false);
  });
  it("classes, negated classes, ranges and escapes", () => {
    expect(matches("[abc].txt", "b.txt")).toBe(true);
    expect(matches("[!abc].txt", "b.txt")).toBe(false);
    expect(matches("[^abc].txt", "d.txt")).toBe(true);
    expect(matches("file[0-9]", "file7")).toBe(true);
    expect(matches("\\*.txt", "*.txt")).toBe(true);
    expect(matches("\\*.txt", "a.txt")).toBe(false);
    expect(matches("a[b", "a[b")).toBe(true); // unclosed class: literal
  });
  it("{a,b} alternatives, nested, and ** across directories", () => {
    expect(matches("*.{ts,tsx}", "x.tsx")).toBe(true);
    expect(matches("*.{ts,tsx}", "x.js")).toBe(false);
    expect(matches("{src,lib/{a,b}}/*.c", "lib/b/x.c")).toBe(true);
    expect(matches("src/**/*.ts", "src/a.ts")).toBe(true);
    expect(matches("src/**/*.ts", "src/a/b/c.ts")).toBe(true);
    expect(matches("src/**", "src/a/b")).toBe(true);
    expect(matches("src/**/*.ts", "lib/a.ts")).toBe(false);
    expect(matches("a.(b)+$", "a.(b)+$")).toBe(true); // regex syntax is literal
  });
  it("lists: plain names exactly, globs on the name, patterns with / on the relative path", () => {
    const m = compilePatterns(["node_modules", "*.log", "build/out"])!;
    expect(m("node_modules", "x/node_modules")).toBe(true);
    expect(m("node_modules2", "node_modules2")).toBe(false);
    expect(m("a.log", "deep/a.log")).toBe(true);
    expect(m("out", "build/out")).toBe(true);
    expect(m("out", "other/out")).toBe(false);
    expect(compilePatterns(["", " "])).toBeUndefined();
    expect(splitPatternList("*.ts, *.{js,jsx} ,,")).toEqual(["*.ts", "*.{js,jsx}"]);
  });
});

describe("FuzzyMatcher (fzf v2 scoring)", () => {
  it("matches characters in order, case-insensitively; rejects otherwise", () => {
    const m = new FuzzyMatcher("mgo");
    expect(m.score("main.go")).toBeGreaterThan(0);
    expect(m.score("MAIN.GO")).toBeGreaterThan(0);
    expect(m.score("gom")).toBeUndefined();
    expect(m.score("mg")).toBeUndefined();
  });
  it("non-ASCII text and patterns are lower-cased as JavaScript does (the ASCII fast rejection defers to it)", () => {
    expect(new FuzzyMatcher("k").score("\u212a")).toBeGreaterThan(0); // the Kelvin sign lower-cases to k
    expect(new FuzzyMatcher("kx").score("\u212a")).toBeUndefined();
    expect(new FuzzyMatcher("ÉTÉ").score("notes/été.md")).toBeGreaterThan(0);
    expect(new FuzzyMatcher("cafe").score("café")).toBeUndefined();
  });
  it("ranks consecutive and boundary matches above scattered ones", () => {
    const m = new FuzzyMatcher("button");
    const exact = m.score("src/components/Button.tsx")!;
    const scattered = m.score("src/b/u/t/t/o/n.txt")!;
    const inWord = m.score("src/rebuttoned.ts")!;
    expect(exact).toBeGreaterThan(inWord);
    expect(exact).toBeGreaterThan(scattered);
    // fzf's numbers: 16 per character, the first at the start (white boundary, 10) counted twice, the next one carrying the run's bonus
    expect(new FuzzyMatcher("ab").score("ab")).toBe(16 + 10 * 2 + 16 + 10);
    // a gap costs 3 to open and 1 per further character
    expect(new FuzzyMatcher("ac").score("abbc")).toBe(16 + 10 * 2 + (-3 - 1) + 16);
  });
});
