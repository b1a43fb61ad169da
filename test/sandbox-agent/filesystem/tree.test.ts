import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kernelConfined, startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { agentClient } from "../../helpers/multipart.js";

let agent: TestAgent;
let api: ReturnType<typeof agentClient>;

beforeAll(async () => {
  agent = await startTestAgent();
  api = agentClient(agent.url);
});
afterAll(() => agent.stop());

describe("/filesystem/tree/{path}", () => {
  it("PUT writes every file under the root (parents created) and answers the root's listing", async () => {
    const res = await api.put("/filesystem/tree/proj").send({ files: { "src/index.ts": "export {}", "README.md": "# hi", "a/b/c.txt": "deep" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ path: "/proj", name: "proj" });
    expect(res.body.files.map((f: { name: string }) => f.name)).toEqual(["README.md"]);
    expect(res.body.subdirectories.map((d: { name: string }) => d.name)).toEqual(["a", "src"]);
    expect(readFileSync(join(agent.root, "proj/a/b/c.txt"), "utf8")).toBe("deep");
    expect(statSync(join(agent.root, "proj/src/index.ts")).mode & 0o777).toBe(0o644);
    expect(statSync(join(agent.root, "proj/a/b")).mode & 0o777).toBe(0o755);
  });

  it("tree paths are absolute however they are written: plain, double slash, encoded", async () => {
    for (const url of ["/filesystem/tree/proj", "/filesystem/tree//proj", "/filesystem/tree/%2Fproj"]) {
      const res = await api.get(url);
      expect(res.status, url).toBe(200);
      expect(res.body.path).toBe("/proj");
    }
    // no destination at all is the root (the SDK's writeTree without one)
    const put = await api.put("/filesystem/tree/").send({ files: { "at-root.txt": "r" } });
    expect(put.status).toBe(200);
    expect(put.body.path).toBe("/");
    expect(readFileSync(join(agent.root, "at-root.txt"), "utf8")).toBe("r");
  });

  it("PUT replaces existing files atomically and keeps the others", async () => {
    await api.put("/filesystem/tree/proj").send({ files: { "README.md": "# v2" } });
    expect(readFileSync(join(agent.root, "proj/README.md"), "utf8")).toBe("# v2");
    expect(readFileSync(join(agent.root, "proj/a/b/c.txt"), "utf8")).toBe("deep");
  });

  it("PUT errors: a body that is not {files}, a key leaving the root, a root that is a file, a key that is a directory", async () => {
    expect((await api.put("/filesystem/tree/proj").send({ files: { a: 1 } })).status).toBe(400);
    expect((await api.put("/filesystem/tree/proj").set("Content-Type", "application/json").send("{nope")).status).toBe(400);
    const escape = await api.put("/filesystem/tree/proj").send({ files: { "ok.txt": "fine", "../escaped.txt": "no" } });
    expect(escape.status).toBe(400);
    expect(escape.body.error).toMatch(/leaves the tree's root/);
    // nothing was written: keys are all checked first
    expect(existsSync(join(agent.root, "escaped.txt"))).toBe(false);
    expect(existsSync(join(agent.root, "proj/ok.txt"))).toBe(false);
    writeFileSync(join(agent.root, "plain-file"), "x");
    expect((await api.put("/filesystem/tree/plain-file").send({ files: { "a.txt": "x" } })).status).toBe(409);
    expect((await api.put("/filesystem/tree/proj").send({ files: { src: "x" } })).status).toBe(409);
  });

  it("PUT through a symlink that leaves the root: 403 (path-checks) or written under the root (openat2)", async () => {
    const outside = tempDir("tree-outside-");
    symlinkSync(outside, join(agent.root, "tree-out"));
    const res = await api.put("/filesystem/tree/tree-out").send({ files: { "x.txt": "x" } });
    expect(res.status).toBe(kernelConfined(agent) ? 200 : 403);
    expect(existsSync(join(outside, "x.txt"))).toBe(false);
    if (kernelConfined(agent)) expect(existsSync(join(agent.root, outside, "x.txt"))).toBe(true);
  });

  it("GET of a missing path or a file: 400 path is not a directory (the reference's answer)", async () => {
    const missing = await api.get("/filesystem/tree/nope");
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatch(/path is not a directory/);
    expect((await api.get("/filesystem/tree/proj/README.md")).status).toBe(400);
  });

  it("DELETE: 422 for a non-empty directory without recursive, then deletes it with; 404 missing, 400 a file, 403 the root", async () => {
    const refused = await api.delete("/filesystem/tree/proj");
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatch(/^error deleting directory: \/proj: directory not empty/);
    const ok = await api.delete("/filesystem/tree/proj?recursive=true");
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ path: "/proj", message: "Directory deleted successfully" });
    expect(existsSync(join(agent.root, "proj"))).toBe(false);
    expect((await api.delete("/filesystem/tree/proj")).status).toBe(404);
    expect((await api.delete("/filesystem/tree/plain-file")).status).toBe(400);
    expect((await api.delete("/filesystem/tree/?recursive=true")).status).toBe(403);
  });

  it("only /filesystem/tree and below is the tree API: /filesystem/treehouse.txt is a file", async () => {
    const put = await api.put("/filesystem/treehouse.txt").send({ content: "a house" });
    expect(put.status).toBe(200);
    expect(readFileSync(join(agent.root, "treehouse.txt"), "utf8")).toBe("a house");
  });
});

describe("wire details", () => {
  it("/filesystem%2F... (only the separating slash encoded) is the same absolute path", async () => {
    mkdirSync(join(agent.root, "wire"), { recursive: true });
    writeFileSync(join(agent.root, "wire/x.txt"), "wired");
    for (const url of ["/filesystem%2Fwire/x.txt", "/filesystem%2Fwire%2Fx.txt", "/filesystem%2fwire/x.txt"]) {
      const res = await api.get(url);
      expect(res.status, url).toBe(200);
      expect(res.body).toMatchObject({ path: "/wire/x.txt", content: "wired" });
    }
    expect((await api.get("/filesystem-find%2Fwire?patterns=*.txt")).body.matches).toEqual([{ path: "x.txt", type: "file" }]);
  });

  it("downloads carry the reference's Content-Type for the extension, else application/octet-stream", async () => {
    const cases: [string, string][] = [
      ["a.txt", "text/plain"],
      ["a.log", "text/plain"],
      ["a.js", "application/javascript"],
      ["a.json", "application/json"],
      ["a.svg", "image/svg+xml"],
      ["a.tar", "application/x-tar"],
      ["a.gz", "application/gzip"],
      ["a.ts", "application/octet-stream"],
      ["noext", "application/octet-stream"],
    ];
    for (const [name] of cases) writeFileSync(join(agent.root, "wire", name), "x");
    for (const [name, type] of cases) {
      const res = await api
        .get(`/filesystem/wire/${name}?download=true`)
        .buffer(true)
        .parse((r, done) => {
          (r as unknown as NodeJS.ReadableStream).resume();
          r.on("end", () => done(null, null));
        });
      expect(res.status).toBe(200);
      expect(res.headers["content-type"], name).toBe(type);
      expect(res.headers["content-disposition"]).toBe(`attachment; filename="${name}"`);
    }
  });
});
