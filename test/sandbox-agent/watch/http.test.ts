import { chmodSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { get, type IncomingMessage } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { kernelConfined, startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { eventually } from "../schedules/eventually.js";
import { agentClient, md5 } from "../../helpers/multipart.js";
import { symlinkSync } from "node:fs";

let agent: TestAgent;
const clock = new FakeClock();

beforeAll(async () => {
  agent = await startTestAgent({}, { clock });
  mkdirSync(join(agent.root, "w/sub"), { recursive: true });
  writeFileSync(join(agent.root, "w/existing.txt"), "old");
  symlinkSync(tempDir("watch-outside-"), join(agent.root, "escape"));
});
afterAll(() => agent.stop());

interface Stream {
  res: IncomingMessage;
  lines: string[];
  events: () => { op: string; name: string; path: string; error: null }[];
  close: () => void;
}

/** Opens a watch stream; resolves once the headers are in (every watch is then in place). */
function watchStream(path: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = get(`${agent.url}/watch/filesystem/${path}`, (res) => {
      const lines: string[] = [];
      let buffer = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buffer += chunk;
        const parts = buffer.split("\n");
        buffer = parts.pop()!;
        lines.push(...parts);
      });
      res.on("end", () => {
        if (buffer) lines.push(buffer);
      });
      resolve({
        res,
        lines,
        events: () => lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)),
        close: () => req.destroy(),
      });
    });
    req.on("error", reject);
  });
}

/** The whole body of a stream that ends (an error answer). */
async function body(s: Stream): Promise<string> {
  if (!s.res.complete) await new Promise((r) => s.res.on("end", r));
  return s.lines.join("\n");
}

/** inotify watches this process holds (the agent runs in it), from the kernel's own accounting. */
function inotifyWatches(): number {
  let n = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) !== "anon_inode:inotify") continue;
      n += readFileSync(`/proc/self/fdinfo/${fd}`, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("inotify wd:")).length;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

describe("GET /watch/filesystem/{path}", () => {
  it("streams text/plain NDJSON {op, name, path, error: null}: create, write, chmod, rename, remove", async () => {
    const s = await watchStream(encodeURIComponent("/w"));
    try {
      expect(s.res.statusCode).toBe(200);
      expect(s.res.headers["content-type"]).toBe("text/plain; charset=utf-8");
      expect(s.res.headers["x-accel-buffering"]).toBe("no");
      const dir = join(agent.root, "w");
      // Each change is made once the previous one was reported: ops are read from the file after the fact (see watcher.ts).
      const step = async (action: () => void, expected: string) => {
        const count = () => s.events().filter((e) => `${e.op} ${e.name}` === expected).length;
        const before = count();
        action();
        await eventually(async () => count() > before, 20_000, expected);
      };
      await step(() => writeFileSync(join(dir, "a.txt"), "1"), "WRITE a.txt"); // CREATE, then the WRITE of its content
      await step(() => writeFileSync(join(dir, "a.txt"), "2", { flag: "a" }), "WRITE a.txt");
      await step(() => chmodSync(join(dir, "a.txt"), 0o600), "CHMOD a.txt");
      await step(() => renameSync(join(dir, "a.txt"), join(dir, "b.txt")), "CREATE b.txt");
      await step(() => rmSync(join(dir, "b.txt")), "REMOVE b.txt");
      await step(() => writeFileSync(join(dir, "sub/not-watched.txt"), "x"), "WRITE nothing"); // (never matches: waits out nothing)
    } catch (err) {
      if (!String(err).includes("WRITE nothing")) throw err;
    } finally {
      s.close();
    }
    const seen = s.events().map((e) => `${e.op} ${e.name}`);
    expect(seen.filter((o) => !o.startsWith("WRITE"))).toEqual(["CREATE a.txt", "CHMOD a.txt", "RENAME a.txt", "CREATE b.txt", "REMOVE b.txt"]);
    expect(s.events()[0]).toEqual({ op: "CREATE", name: "a.txt", path: "/w", error: null });
    expect(s.lines[0]).toBe('{"op":"CREATE","name":"a.txt","path":"/w","error":null}');
    expect(seen.some((o) => o.includes("not-watched"))).toBe(false); // not recursive
  });

  it("the agent's own writes report the user's names only: PUT, overwrite and multipart land as the reference's in-place writes", async () => {
    mkdirSync(join(agent.root, "own"), { recursive: true });
    const api = agentClient(agent.url);
    const s = await watchStream(encodeURIComponent("/own"));
    try {
      // The reference's TestFileSystemWatch: the first line names the file written (no temp file of the agent's).
      expect((await api.put(`/filesystem/${encodeURIComponent("/own/watched.txt")}`).send({ content: "hello watch!" })).status).toBe(200);
      await eventually(async () => s.events().some((e) => e.op === "WRITE" && e.name === "watched.txt"), 20_000, "WRITE watched.txt");
      expect(s.lines[0]).toBe('{"op":"CREATE","name":"watched.txt","path":"/own","error":null}');
      expect(s.events().map((e) => `${e.op} ${e.name}`)).toEqual(["CREATE watched.txt", "WRITE watched.txt"]);
      // Replacing it is a WRITE (os.WriteFile truncates in place), not a CREATE of a new file.
      expect((await api.put(`/filesystem/${encodeURIComponent("/own/watched.txt")}`).send({ content: "again" })).status).toBe(200);
      await eventually(async () => s.events().length === 3, 20_000, "third event");
      expect(s.events()[2]).toEqual({ op: "WRITE", name: "watched.txt", path: "/own", error: null });
      const data = Buffer.alloc(1024, 7);
      const uploadId = await api.initiate("/own/uploaded.bin");
      expect((await api.part(uploadId, 1, data)).status).toBe(200);
      expect((await api.complete(uploadId, [{ partNumber: 1, etag: md5(data) }])).status).toBe(200);
      await eventually(async () => s.events().some((e) => e.name === "uploaded.bin"), 20_000, "uploaded.bin");
      await new Promise((r) => setTimeout(r, 200)); // anything late about the agent's own files would be in by now
      const names = new Set(s.events().map((e) => e.name));
      expect([...names]).toEqual(["watched.txt", "uploaded.bin"]);
      expect(s.lines.some((l) => l.includes(".tmp") || l.includes("probe"))).toBe(false);
    } finally {
      s.close();
    }
    // A user's own file of that shape is reported: only names the agent is writing right now are hidden.
    const s2 = await watchStream(encodeURIComponent("/own"));
    try {
      writeFileSync(join(agent.root, "own/.266300ff9979.tmp"), "mine");
      await eventually(async () => s2.events().some((e) => e.name === ".266300ff9979.tmp"), 20_000, "the user's .tmp");
    } finally {
      s2.close();
    }
  });

  it("a burst of changes faster than delivery still reports each arrival, move and removal in order", async () => {
    const s = await watchStream(encodeURIComponent("/w"));
    try {
      const dir = join(agent.root, "w");
      writeFileSync(join(dir, "c.txt"), "1");
      writeFileSync(join(dir, "c.txt"), "2", { flag: "a" });
      renameSync(join(dir, "c.txt"), join(dir, "d.txt"));
      rmSync(join(dir, "d.txt"));
      await eventually(async () => s.events().some((e) => e.op === "REMOVE" && e.name === "d.txt"), 20_000, "REMOVE d.txt");
      expect(
        s
          .events()
          .map((e) => `${e.op} ${e.name}`)
          .filter((o) => !o.startsWith("WRITE")),
      ).toEqual(["CREATE c.txt", "RENAME c.txt", "CREATE d.txt", "REMOVE d.txt"]);
    } finally {
      s.close();
    }
  });

  it("a trailing /** watches recursively: new directories are watched and their contents reported", async () => {
    const s = await watchStream(`${encodeURIComponent("/w")}/**`);
    try {
      const dir = join(agent.root, "w");
      writeFileSync(join(dir, "sub/deep.txt"), "x");
      mkdirSync(join(dir, "new/inner"), { recursive: true });
      writeFileSync(join(dir, "new/inner/file.txt"), "x");
      await eventually(async () => s.events().some((e) => e.name === "file.txt" && e.path === "/w/new/inner"), 20_000, "file.txt in a new directory");
      expect(s.events().some((e) => e.op === "CREATE" && e.name === "deep.txt" && e.path === "/w/sub")).toBe(true);
      expect(s.events().some((e) => e.op === "CREATE" && e.name === "new" && e.path === "/w")).toBe(true);
      expect(s.events().some((e) => e.name === "existing.txt")).toBe(false); // pre-existing files are not reported
    } finally {
      s.close();
    }
  });

  it("ignore: events whose path contains an entry are dropped (files and whole folders)", async () => {
    const s = await watchStream(`${encodeURIComponent("/w")}/**?ignore=ignored.txt,ignored-folder`);
    try {
      const dir = join(agent.root, "w");
      writeFileSync(join(dir, "ignored.txt"), "x");
      mkdirSync(join(dir, "ignored-folder"));
      writeFileSync(join(dir, "ignored-folder/in.txt"), "x");
      writeFileSync(join(dir, "kept.txt"), "x");
      await eventually(async () => s.events().some((e) => e.name === "kept.txt"), 20_000, "kept.txt");
      expect(s.events().filter((e) => e.name.startsWith("ignored") || e.path.includes("ignored"))).toEqual([]);
    } finally {
      s.close();
    }
  });

  it("sends [keepalive] every 30 s", async () => {
    const s = await watchStream(encodeURIComponent("/w"));
    try {
      clock.advance(30_000);
      await eventually(async () => s.lines.includes("[keepalive]"), 20_000, "keepalive");
      clock.advance(30_000);
      await eventually(async () => s.lines.filter((l) => l === "[keepalive]").length === 2, 20_000, "second keepalive");
    } finally {
      s.close();
    }
  });

  it("a dropped client frees every watch it held (the agent's count and the kernel's)", async () => {
    await eventually(async () => agent.runtime.deps.watches.watches === 0, 20_000, "earlier streams closed");
    const before = inotifyWatches();
    const s = await watchStream(`${encodeURIComponent("/w")}/**`);
    const dirs = agent.runtime.deps.watches.watches;
    expect(dirs).toBeGreaterThanOrEqual(4); // w, w/sub, w/new, w/new/inner, ...
    expect(inotifyWatches()).toBe(before + dirs);
    expect(agent.runtime.deps.watches.streams).toBe(1);
    s.close();
    await eventually(async () => agent.runtime.deps.watches.watches === 0, 20_000, "watches freed");
    expect(agent.runtime.deps.watches.streams).toBe(0);
    await eventually(async () => inotifyWatches() === before, 20_000, "kernel watches freed");
  });

  it("errors: 400 path is not a directory (missing or a file); a link out of the root 403 (path-checks) or confined (openat2)", async () => {
    for (const path of ["/nope", "/w/existing.txt"]) {
      const s = await watchStream(encodeURIComponent(path));
      expect(s.res.statusCode).toBe(400);
      expect(JSON.parse(await body(s)).error).toMatch(/path is not a directory/);
    }
    const out = await watchStream(encodeURIComponent("/escape"));
    // openat2: the link's host target is a sandbox path under the root, where nothing is: not a directory.
    expect(out.res.statusCode).toBe(kernelConfined(agent) ? 400 : 403);
    await body(out);
  });
});
