import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kernelConfined, startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { agentClient } from "../../helpers/multipart.js";

let agent: TestAgent;
let api: ReturnType<typeof agentClient>;

/** The reference's integration-test layout, plus the cases it does not cover. */
const FILES: Record<string, string> = {
  "proj/main.go": 'package main\n\nfunc main() {\n\tprintln("Hello, World")\n}\n',
  "proj/util.go": "package main\n// helper: hello\n",
  "proj/pkg/lib.go": 'package pkg\nconst Greeting = "hello"\n',
  "proj/pkg/lib_test.go": "package pkg\n",
  "proj/README.md": "# Project\nSay hello.\nline three\nline four\n",
  "proj/docs/guide.md": "guide\n",
  "proj/node_modules/dep/index.js": "module.exports = 'hello'\n",
  "proj/.hidden/secret.txt": "hidden hello\n",
  "proj/crlf.txt": "one\r\nhello crlf\r\n",
  "proj/unicode.txt": "naïve café hello\n",
};

beforeAll(async () => {
  agent = await startTestAgent();
  api = agentClient(agent.url);
  for (const [rel, content] of Object.entries(FILES)) {
    mkdirSync(dirname(join(agent.root, rel)), { recursive: true });
    writeFileSync(join(agent.root, rel), content);
  }
  writeFileSync(join(agent.root, "proj/image.bin"), Buffer.concat([Buffer.from("hello"), Buffer.alloc(16), Buffer.from("hello")]));
  const outside = tempDir("search-outside-");
  writeFileSync(join(outside, "leak.go"), "package leak // hello\n");
  symlinkSync(outside, join(agent.root, "proj/outside-dir"));
  symlinkSync(join(outside, "leak.go"), join(agent.root, "proj/outside-file.go"));
  symlinkSync(outside, join(agent.root, "escape"));
});
afterAll(() => agent.stop());

const paths = (body: { matches: { path: string }[] | null }) => (body.matches ?? []).map((m) => m.path).sort();

describe("GET /filesystem-find/{path}", () => {
  it("files by basename glob, default exclusions and hidden skipped; symlinks are listed, never followed", async () => {
    const res = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?patterns=*.go`);
    expect(res.status).toBe(200);
    expect(paths(res.body)).toEqual(["main.go", "outside-file.go", "pkg/lib.go", "pkg/lib_test.go", "util.go"]);
    expect(res.body.total).toBe(5);
    expect(res.body.matches[0]).toEqual({ path: "main.go", type: "file" });
  });

  it("type=directory lists the directory itself as '.', then its subdirectories", async () => {
    const res = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?type=directory`);
    expect(paths(res.body)).toEqual([".", "docs", "pkg"]);
    expect(res.body.matches.every((m: { type: string }) => m.type === "directory")).toBe(true);
  });

  it("maxResults cuts in lexical walk order and says truncated; 0 is unlimited", async () => {
    const res = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?patterns=*.go&maxResults=2`);
    expect(res.body).toEqual({
      matches: [
        { path: "main.go", type: "file" },
        { path: "outside-file.go", type: "file" },
      ],
      total: 2,
      truncated: true,
    });
    const all = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?maxResults=0`);
    expect(all.body.total).toBe(11); // the symlink to a directory outside is listed as a file, not entered
    expect(all.body.truncated).toBeUndefined();
  });

  it("excludeDirs replaces the defaults ('docs' brings node_modules back); excludeHidden=false finds hidden files", async () => {
    const res = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?patterns=*.js,*.md&excludeDirs=docs`);
    expect(paths(res.body)).toEqual(["README.md", "node_modules/dep/index.js"]);
    const hidden = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?patterns=secret.txt&excludeHidden=false`);
    expect(paths(hidden.body)).toEqual([".hidden/secret.txt"]);
  });

  it("patterns with a / match the relative path (** across levels); maxDepth limits the levels", async () => {
    const res = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?patterns=pkg/**/*_test.go`);
    expect(paths(res.body)).toEqual(["pkg/lib_test.go"]);
    const shallow = await api.get(`/filesystem-find/${encodeURIComponent("/proj")}?patterns=*.go&maxDepth=1`);
    expect(paths(shallow.body)).toEqual(["main.go", "outside-file.go", "util.go"]);
  });

  it("errors: 400 invalid type, invalid maxResults, maxDepth=0, a file; 404 a missing directory; a link out of the root 403 (path-checks) or 404 under it (openat2)", async () => {
    const dir = encodeURIComponent("/proj");
    expect((await api.get(`/filesystem-find/${dir}?type=socket`)).body).toEqual({ error: "invalid search type: socket" });
    expect((await api.get(`/filesystem-find/${dir}?maxResults=-1`)).body).toEqual({ error: "invalid maxResults: -1" });
    expect((await api.get(`/filesystem-find/${dir}?maxResults=ten`)).status).toBe(400);
    expect((await api.get(`/filesystem-find/${dir}?maxDepth=0`)).status).toBe(400);
    expect((await api.get(`/filesystem-find/${encodeURIComponent("/proj/main.go")}`)).status).toBe(400);
    expect((await api.get(`/filesystem-find/${encodeURIComponent("/nope")}`)).status).toBe(404);
    // openat2: the link's host target is a sandbox path under the root, where nothing is (404).
    expect((await api.get(`/filesystem-find/${encodeURIComponent("/escape")}`)).status).toBe(kernelConfined(agent) ? 404 : 403);
    expect((await api.get(`/filesystem-find/${encodeURIComponent("/../etc")}`)).status).toBe(403);
  });
});

describe("GET /filesystem-search/{path}", () => {
  it("?query= fuzzy-matches relative paths of files and directories, best first, with fzf scores", async () => {
    const res = await api.get(`/filesystem-search/${encodeURIComponent("/proj")}?query=libgo`);
    expect(res.status).toBe(200);
    expect(res.body.matches[0]).toEqual({ path: "pkg/lib.go", score: expect.any(Number), type: "file" });
    expect(paths(res.body)).toEqual(["pkg/lib.go", "pkg/lib_test.go"]);
    const scores = res.body.matches.map((m: { score: number }) => m.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    const dirs = await api.get(`/filesystem-search/${encodeURIComponent("/proj")}?query=pkg&maxResults=1`);
    expect(dirs.body).toMatchObject({ matches: [{ path: "pkg", type: "directory" }], total: 1, truncated: true });
  });

  it("without ?query the path text is the pattern (the reference's rule); the root alone is a 400", async () => {
    // "/proj/pkg" as a pattern: only entries whose relative path holds / p r o j / p k g in order
    const res = await api.get(`/filesystem-search/${encodeURIComponent("/proj")}`);
    expect(res.status).toBe(200);
    expect(res.body.matches).toEqual([]);
    const root = await api.get(`/filesystem-search/${encodeURIComponent("/")}`);
    expect(root.status).toBe(400);
    expect(root.body.error).toMatch(/query parameter is required in path/);
    expect((await api.get(`/filesystem-search/${encodeURIComponent("/proj")}?query=x&maxResults=x`)).status).toBe(400);
    expect((await api.get(`/filesystem-search/${encodeURIComponent("/nope")}?query=x`)).status).toBe(404);
  });
});

describe("GET /filesystem-content-search/{path}", () => {
  const grep = (query: string, extra = "", dir = "/proj") =>
    api.get(`/filesystem-content-search/${encodeURIComponent(dir)}?query=${encodeURIComponent(query)}${extra}`);

  it("case-insensitive substring by default: path, 1-based line and byte column, the whole line", async () => {
    const res = await grep("hello", "&maxResults=0");
    expect(res.status).toBe(200);
    expect(res.body.query).toBe("hello");
    const main = res.body.matches.find((m: { path: string }) => m.path === "main.go");
    expect(main).toEqual({ path: "main.go", line: 4, column: 11, text: '\tprintln("Hello, World")' });
    // binary files, hidden files' default exclusion does not apply (grep searches them), node_modules excluded, symlinks skipped
    expect(paths(res.body)).toEqual([".hidden/secret.txt", "README.md", "crlf.txt", "main.go", "pkg/lib.go", "unicode.txt", "util.go"]);
    expect(res.body.matches.find((m: { path: string }) => m.path === "crlf.txt").text).toBe("hello crlf\r");
    // columns count bytes: "naïve café " is 13 bytes
    expect(res.body.matches.find((m: { path: string }) => m.path === "unicode.txt").column).toBe(14);
  });

  it("caseSensitive=true, regex=true, contextLines, filePattern and excludePatterns", async () => {
    expect(paths((await grep("Hello", "&caseSensitive=true")).body)).toEqual(["main.go"]);
    const re = await grep('^const \\w+ = "h', "&regex=true");
    expect(re.body.matches).toEqual([{ path: "pkg/lib.go", line: 2, column: 1, text: 'const Greeting = "hello"' }]);
    const ctx = await grep("say", "&contextLines=1");
    expect(ctx.body.matches).toEqual([{ path: "README.md", line: 2, column: 1, text: "Say hello.", context: "# Project\nSay hello.\nline three" }]);
    expect(paths((await grep("hello", "&filePattern=*.go")).body)).toEqual(["main.go", "pkg/lib.go", "util.go"]);
    expect(paths((await grep("hello", "&filePattern=*.{go,md}&excludePatterns=util.go")).body)).toEqual(["README.md", "main.go", "pkg/lib.go"]);
    expect(paths((await grep("hello", "&excludeDirs=pkg,.hidden")).body)).toEqual([
      "README.md",
      "crlf.txt",
      "main.go",
      "node_modules/dep/index.js",
      "unicode.txt",
      "util.go",
    ]);
    expect(paths((await grep("CAFÉ")).body)).toEqual(["unicode.txt"]);
  });

  it("maxResults stops the search and says truncated; nothing found answers matches: null, as the reference", async () => {
    const res = await grep("e", "&maxResults=2");
    expect(res.body.matches).toHaveLength(2);
    expect(res.body).toMatchObject({ total: 2, truncated: true });
    expect((await grep("no such text anywhere")).body).toEqual({ query: "no such text anywhere", matches: null, total: 0 });
  });

  it("errors: 400 without query, for an invalid regex, a bad maxResults and a missing directory; a link out of the root 403 (path-checks) or 400 under it (openat2)", async () => {
    expect((await api.get(`/filesystem-content-search/${encodeURIComponent("/proj")}`)).body).toEqual({ error: "query parameter is required" });
    expect((await grep("(", "&regex=true")).body.error).toMatch(/^invalid regex/);
    expect((await grep("x", "&maxResults=1.5")).status).toBe(400);
    expect((await grep("x", "&contextLines=-1")).status).toBe(400);
    const missing = await grep("x", "", "/nope");
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe("specified directory does not exist: /nope");
    // grep answers a missing directory with 400 (the reference), so a link confined to nothing under the root does too.
    expect((await grep("hello", "", "/escape")).status).toBe(kernelConfined(agent) ? 400 : 403);
  });
});
