import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { joinShares, runShares, type SharedWalk } from "../../../sandbox-agent/search/answer.js";
import { ContentSearcher, WINDOW_BYTES, type ContentMatch } from "../../../sandbox-agent/search/content.js";
import { runFind, runGrep, type SearchJob } from "../../../sandbox-agent/search/jobs.js";
import { parseFindQuery, parseFuzzyQuery, parseGrepQuery } from "../../../sandbox-agent/search/options.js";
import { tempDir } from "../../helpers/agent.js";

let root: string;
beforeAll(() => {
  root = tempDir("search-jobs-");
  for (let d = 0; d < 10; d++) {
    mkdirSync(join(root, `d${d}`));
    for (let f = 0; f < 40; f++) writeFileSync(join(root, `d${d}`, `f${f}.txt`), `file ${d}/${f}\nneedle\n`);
  }
});

const never = () => false;

describe("search jobs stop early", () => {
  it("a passed deadline stops the walk and answers what was found, truncated", () => {
    const options = parseFindQuery({ maxResults: "0" });
    const full = runFind({ kind: "find", hostDir: root, hostRoot: root, options, deadline: Date.now() + 60_000 }, never);
    expect(full.total).toBe(400);
    expect(full.truncated).toBeUndefined();
    const late = runFind({ kind: "find", hostDir: root, hostRoot: root, options, deadline: Date.now() - 1 }, never);
    expect(late.truncated).toBe(true);
    expect(late.total).toBeLessThan(400);
    const grep = runGrep(
      { kind: "grep", hostDir: root, hostRoot: root, options: parseGrepQuery({ query: "needle", maxResults: "0" }), deadline: Date.now() - 1 },
      never,
    );
    expect(grep.truncated).toBe(true);
    expect(grep.total).toBeLessThan(400);
  });

  it("a cancelled search (its client went away) stops at the next check", () => {
    let checks = 0;
    const result = runGrep(
      { kind: "grep", hostDir: root, hostRoot: root, options: parseGrepQuery({ query: "needle", maxResults: "0" }), deadline: Date.now() + 60_000 },
      () => ++checks > 1,
    );
    expect(result.total).toBeLessThan(400);
  });

  it("content outside the root is never returned, even when a walk reaches it", () => {
    // the job's root is a sibling: every real path it meets is outside it
    const result = runGrep(
      { kind: "grep", hostDir: root, hostRoot: join(root, "d0"), options: parseGrepQuery({ query: "needle" }), deadline: Date.now() + 60_000 },
      never,
    );
    expect(result.matches?.every((m) => m.path.startsWith("d0/"))).toBe(true);
    expect(result.total).toBe(40);
  });
});

describe("a walk shared out among workers", () => {
  const shared = (): SharedWalk => {
    const names = Array.from({ length: 10 }, (_, d) => `d${d}`); // (lexical order: d0…d9)
    return { topLevel: [names.slice(0, 3), names.slice(3, 4), names.slice(4, 8), names.slice(8)], claim: new SharedArrayBuffer(4) };
  };
  const jobs = (): SearchJob[] => [
    { kind: "find", hostDir: root, hostRoot: root, options: parseFindQuery({ maxResults: "0" }), deadline: Date.now() + 60_000 },
    { kind: "find", hostDir: root, hostRoot: root, options: parseFindQuery({ maxResults: "130" }), deadline: Date.now() + 60_000 },
    { kind: "find", hostDir: root, hostRoot: root, options: parseFindQuery({ type: "directory" }), deadline: Date.now() + 60_000 },
    { kind: "fuzzy", hostDir: root, hostRoot: root, options: parseFuzzyQuery({ query: "d1f1", maxResults: "7" }, "/"), deadline: Date.now() + 60_000 },
    { kind: "grep", hostDir: root, hostRoot: root, options: parseGrepQuery({ query: "NEEDLE", maxResults: "45" }), deadline: Date.now() + 60_000 },
    { kind: "grep", hostDir: root, hostRoot: root, options: parseGrepQuery({ query: "absent" }), deadline: Date.now() + 60_000 },
  ];

  it("every share is claimed once, by whichever worker asks first", () => {
    const walk = shared();
    const first = runShares(jobs()[0]!, walk, never);
    expect(first.map((a) => a.share)).toEqual([0, 1, 2, 3]);
    expect(runShares(jobs()[0]!, walk, never)).toEqual([]);
  });

  it("the joined answer is the answer of the whole walk, cut at the limit in walk order (fuzzy: by score)", () => {
    for (const job of jobs()) {
      const whole = joinShares(job, [runShares(job, undefined, never)]);
      const [first, ...rest] = runShares(job, shared(), never);
      const joined = joinShares(job, [rest, [first!]]); // (workers answer in any order)
      expect(JSON.parse(joined), `${job.kind} ${JSON.stringify(job.options)}`).toEqual(JSON.parse(whole));
    }
  });
});

describe("ContentSearcher on a file larger than one read window", () => {
  it("numbers lines across windows and finds matches in every window", () => {
    const dir = tempDir("search-big-");
    const line = "x".repeat(99) + "\n"; // 100 bytes
    const lines = Math.ceil((WINDOW_BYTES * 2.5) / 100);
    const chunks: string[] = [];
    for (let i = 1; i <= lines; i++) chunks.push(i % 50_000 === 0 ? `match at ${i}\n` : line);
    writeFileSync(join(dir, "big.txt"), chunks.join(""));
    const out: ContentMatch[] = [];
    new ContentSearcher({ query: "match", caseSensitive: true, regex: false, contextLines: 1 }).searchFile(
      join(dir, "big.txt"),
      "big.txt",
      out,
      1000,
      () => true,
    );
    expect(out.map((m) => m.line)).toEqual(Array.from({ length: Math.floor(lines / 50_000) }, (_, i) => (i + 1) * 50_000));
    expect(out[0]!.text).toBe("match at 50000");
    expect(out[0]!.context).toBe(`${line.trimEnd()}\nmatch at 50000\n${line.trimEnd()}`);
  });

  it("cuts very long lines in the answer", () => {
    const dir = tempDir("search-long-");
    writeFileSync(join(dir, "min.js"), `${"a".repeat(10_000)}needle${"b".repeat(10_000)}`);
    const out: ContentMatch[] = [];
    new ContentSearcher({ query: "needle", caseSensitive: false, regex: false, contextLines: 0 }).searchFile(
      join(dir, "min.js"),
      "min.js",
      out,
      10,
      () => true,
    );
    expect(out).toHaveLength(1);
    expect(out[0]!.column).toBe(10_001);
    expect(out[0]!.text.length).toBe(4097);
    expect(out[0]!.text.endsWith("…")).toBe(true);
  });
});
