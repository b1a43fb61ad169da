import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { sandboxAt } from "../../helpers/sdk.js";
import { eventually } from "../schedules/eventually.js";

const TOKEN = "sdk-search-token";
let agent: TestAgent;
let sandbox: Awaited<ReturnType<typeof sandboxAt>>;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  sandbox = await sandboxAt(agent.url, "sdk-search", { apiKey: TOKEN });
  const files: Record<string, string> = {
    "proj/src/main.ts": "export const greeting = 'Hello';\n",
    "proj/src/util.ts": "// hello helper\nexport {};\n",
    "proj/docs/notes.md": "nothing here\n",
    "proj/node_modules/dep/index.ts": "hello\n",
    "proj/.cache/hello.ts": "hello\n",
  };
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(agent.root, rel)), { recursive: true });
    writeFileSync(join(agent.root, rel), content);
  }
});
afterAll(() => agent.stop());

describe("@blaxel/core sandbox.fs: tree, find, search, grep, watch", () => {
  it("writeTree writes the files under the destination and returns the listing; the tree GET reads it back", async () => {
    const listing = await sandbox.fs.writeTree(
      [
        { path: "src/app.ts", content: "console.log('app')" },
        { path: "package.json", content: "{}" },
      ],
      "/tree-app",
    );
    expect(listing).toMatchObject({ path: "/tree-app", files: [{ name: "package.json" }], subdirectories: [{ name: "src" }] });
    expect(readFileSync(join(agent.root, "tree-app/src/app.ts"), "utf8")).toBe("console.log('app')");
    // the SDK has no readTree helper: its generated client's GET /filesystem/tree/{path}
    const read = await sandbox.fs.client.get({ url: "/filesystem/tree/tree-app/src", baseUrl: sandbox.fs.url });
    expect(read.response.status).toBe(200);
    expect(read.data).toMatchObject({ path: "/tree-app/src", files: [{ name: "app.ts", size: 18 }] });
  });

  it("writeTree without a destination writes under / (the reference's rule)", async () => {
    await sandbox.fs.writeTree([{ path: "tree-root/a.txt", content: "a" }]);
    expect(readFileSync(join(agent.root, "tree-root/a.txt"), "utf8")).toBe("a");
  });

  it("find: type, patterns, maxResults, excludeDirs, excludeHidden", async () => {
    const ts = await sandbox.fs.find("/proj", { patterns: ["*.ts"] });
    expect(ts.matches.map((m) => m.path)).toEqual(["src/main.ts", "src/util.ts"]);
    expect(ts.total).toBe(2);
    const dirs = await sandbox.fs.find("/proj", { type: "directory" });
    expect(dirs.matches.map((m) => m.path)).toEqual([".", "docs", "src"]);
    const all = await sandbox.fs.find("/proj", { patterns: ["*.ts"], excludeDirs: ["docs"], excludeHidden: false, maxResults: 10 });
    expect(all.matches.map((m) => m.path)).toEqual([".cache/hello.ts", "node_modules/dep/index.ts", "src/main.ts", "src/util.ts"]);
    expect((await sandbox.fs.find("/proj", { maxResults: 1 })).matches).toHaveLength(1);
  });

  it("search: shapes as the SDK reads them (it never sends its query: the path is the pattern, as on the reference)", async () => {
    mkdirSync(join(agent.root, "proj/sub"), { recursive: true });
    writeFileSync(join(agent.root, "proj/sub/proj-plan.md"), "x");
    const res = await sandbox.fs.search("plan", "/proj");
    expect(res.matches[0]).toEqual({ path: "sub/proj-plan.md", score: expect.any(Number), type: "file" });
    expect(res.total).toBe(res.matches.length);
    await expect(sandbox.fs.search("anything")).rejects.toThrow(/query parameter is required/);
  });

  it("grep: case, contextLines, maxResults, filePattern, excludeDirs", async () => {
    const res = await sandbox.fs.grep("hello", "/proj");
    expect(res.matches.map((m) => m.path).sort()).toEqual([".cache/hello.ts", "src/main.ts", "src/util.ts"]);
    expect(res.matches.find((m) => m.path === "src/main.ts")).toEqual({ path: "src/main.ts", line: 1, column: 26, text: "export const greeting = 'Hello';" });
    expect((await sandbox.fs.grep("Hello", "/proj", { caseSensitive: true })).matches.map((m) => m.path)).toEqual(["src/main.ts"]);
    const ctx = await sandbox.fs.grep("helper", "/proj", { contextLines: 1, filePattern: "*.ts", excludeDirs: ["node_modules"] });
    expect(ctx.matches).toEqual([{ path: "src/util.ts", line: 1, column: 10, text: "// hello helper", context: "// hello helper\nexport {};" }]);
    expect((await sandbox.fs.grep("hello", "/proj", { maxResults: 1 })).matches).toHaveLength(1);
    await expect(sandbox.fs.grep("hello", "/no-such-dir")).rejects.toThrow(/specified directory does not exist/);
  });

  it("watch: the callback gets real events (with content on request); after close() none arrives", async () => {
    mkdirSync(join(agent.root, "watched"), { recursive: true });
    const events: { op: string; name: string; path: string; content?: string }[] = [];
    const handle = sandbox.fs.watch("/watched", (e) => void events.push(e), { withContent: true, ignore: ["skip-me"] });
    try {
      await eventually(async () => agent.runtime.deps.watches.watches === 1, 20_000, "watch in place");
      await sandbox.fs.write("/watched/skip-me.txt", "no");
      await sandbox.fs.write("/watched/hello.txt", "hi there");
      await eventually(async () => events.some((e) => e.name === "hello.txt" && e.content === "hi there"), 20_000, "event with content");
      // Only the user's names (the reference's TestFileSystemWatch: the first event names the file written), never the agent's temp file.
      expect(events[0]).toMatchObject({ op: "CREATE", name: "hello.txt", path: "/watched" });
      expect(events.every((e) => e.name === "hello.txt")).toBe(true);
      const seen = events.length;
      await sandbox.fs.write("/watched/hello.txt", "replaced");
      await eventually(async () => events.some((e) => e.content === "replaced"), 20_000, "the overwrite's event");
      expect(events.slice(seen).map((e) => `${e.op} ${e.name}`)).toEqual(["WRITE hello.txt"]);
    } finally {
      handle.close();
    }
    // That the agent frees a dropped client's watches is test/sandbox-agent/watch's (a raw client): under load the
    // SDK's close() now and then leaves its connection open (about 1 run in 9, the agent's stream count stays 1).
    await sandbox.fs.write("/watched/after-close.txt", "late");
    await new Promise((r) => setTimeout(r, 300));
    expect(events.some((e) => e.name === "after-close.txt")).toBe(false);
  });

  it("watch of a path that is not a directory reports through onError", async () => {
    const failures: Error[] = [];
    const handle = sandbox.fs.watch("/no-such-dir", () => undefined, { withContent: false, onError: (err) => void failures.push(err) });
    await eventually(async () => failures.length > 0, 20_000, "onError");
    handle.close();
    expect(failures[0]!.message).toMatch(/path is not a directory/);
  });

  it("rm of a non-empty directory without recursive fails with the reference's message", async () => {
    await expect(sandbox.fs.rm("/proj/docs")).rejects.toThrow(/error deleting directory/);
    await sandbox.fs.rm("/proj/docs", true);
  });
});
