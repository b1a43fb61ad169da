import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kernelConfined, startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { agentClient } from "../../helpers/multipart.js";

const TOKEN = "fs-token";
let agent: TestAgent;
let api: ReturnType<typeof agentClient>;
let outside: string;
const enc = (p: string) => `/filesystem/${encodeURIComponent(p)}`;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  api = agentClient(agent.url, TOKEN);
  outside = tempDir("outside-");
  writeFileSync(join(outside, "secret.txt"), "top secret");
  symlinkSync(outside, join(agent.root, "out"));
  symlinkSync(join(outside, "secret.txt"), join(agent.root, "secret-link"));
});
afterAll(() => agent.stop());

describe("cross-cutting", () => {
  it("GET /health needs no token", async () => {
    const res = await request(agent.url).get("/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ok", version: expect.any(String) });
  });
  it("accepts the token in Authorization, X-Blaxel-Authorization and X-Service-Authorization; refuses a wrong one", async () => {
    for (const header of ["Authorization", "X-Blaxel-Authorization", "X-Service-Authorization"]) {
      expect((await request(agent.url).get("/filesystem/").set(header, `Bearer ${TOKEN}`)).status).toBe(200);
    }
    const wrong = await request(agent.url).get("/filesystem/").set("Authorization", "Bearer nope");
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: "invalid token" });
  });
  it("answers preflights with 204 before auth, and CORS on every reply", async () => {
    const res = await request(agent.url).options("/filesystem/x");
    expect(res.status).toBe(204);
    expect(res.headers["access-control-allow-origin"]).toBe("*");
    expect(res.headers["access-control-allow-headers"]).toMatch(/X-Blaxel-Authorization/);
  });
  it("answers unknown routes with JSON 404", async () => {
    const res = await api.get("/no/such/route");
    expect(res.status).toBe(404);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.body).toEqual({ error: expect.stringMatching(/no route/) });
  });
});

describe("PUT then GET /filesystem/{path}", () => {
  it("writes and reads text; encoded, plain and double-slash paths name the same file", async () => {
    const put = await api.put(enc("/docs/a.txt")).send({ content: "héllo" });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ message: "File created/updated successfully", path: "/docs/a.txt", size: 6 });
    for (const url of [enc("/docs/a.txt"), "/filesystem/docs/a.txt", "/filesystem//docs/a.txt"]) {
      const res = await api.get(url);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ path: "/docs/a.txt", name: "a.txt", content: "héllo", size: 6, permissions: "644" });
    }
  });
  it("replaces atomically, keeping the mode, and leaves no temp file", async () => {
    await api.put(enc("/docs/mode.sh")).send({ content: "v1", permissions: "0755" });
    await api.put(enc("/docs/mode.sh")).send({ content: "v2" });
    expect(readFileSync(join(agent.root, "docs/mode.sh"), "utf8")).toBe("v2");
    expect(statSync(join(agent.root, "docs/mode.sh")).mode & 0o777).toBe(0o755);
    expect(readdirSync(join(agent.root, "docs")).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  });
  it("creates directories and lists them", async () => {
    expect((await api.put(enc("/tree/sub")).send({ isDirectory: true })).body).toEqual({ message: "Directory created successfully", path: "/tree/sub" });
    await api.put(enc("/tree/f.txt")).send({ content: "x" });
    const res = await api.get(enc("/tree"));
    expect(res.body).toMatchObject({
      path: "/tree",
      name: "tree",
      files: [{ path: "/tree/f.txt", name: "f.txt", size: 1 }],
      subdirectories: [{ path: "/tree/sub", name: "sub" }],
    });
  });
  it("streams a multipart/form-data upload with permissions", async () => {
    const data = Buffer.alloc(300_000, 9);
    const res = await api.put("/filesystem//bin/blob.bin").field("permissions", "0600").attach("file", data, "test-binary.bin");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Binary file uploaded successfully", path: "/bin/blob.bin", size: data.length });
    expect(statSync(join(agent.root, "bin/blob.bin")).mode & 0o777).toBe(0o600);
  });
  it("downloads raw bytes with Accept: application/octet-stream, ?download=true or a non-JSON Accept, with Range", async () => {
    await api.put(enc("/dl/data.txt")).send({ content: "0123456789" });
    const a = await api.get(enc("/dl/data.txt")).set("Accept", "application/octet-stream");
    expect(a.headers["content-disposition"]).toMatch(/attachment; filename="?data.txt/);
    expect(a.headers["content-length"]).toBe("10");
    expect(a.text).toBe("0123456789");
    const b = await api.get(`${enc("/dl/data.txt")}?download=true`);
    expect(b.text).toBe("0123456789");
    const c = await api.get(enc("/dl/data.txt")).set("Accept", "text/plain");
    expect(c.text).toBe("0123456789");
    const range = await api.get(enc("/dl/data.txt")).set("Accept", "application/octet-stream").set("Range", "bytes=2-4");
    expect(range.status).toBe(206);
    expect(range.text).toBe("234");
  });
  it("416 with Content-Range bytes */size for a range starting past the end, open-ended included", async () => {
    await api.put(enc("/dl/thousand.bin")).send({ content: "x".repeat(1000) });
    for (const header of ["bytes=5000-", "bytes=1000-", "bytes=5000-6000"]) {
      const res = await api.get(enc("/dl/thousand.bin")).set("Accept", "application/octet-stream").set("Range", header);
      expect(res.status, header).toBe(416);
      expect(res.headers["content-range"]).toBe("bytes */1000");
      expect(JSON.parse(res.text)).toEqual({ error: expect.stringMatching(/outside \/dl\/thousand.bin \(1000 bytes\)/) });
    }
    const tail = await api.get(enc("/dl/thousand.bin")).set("Accept", "application/octet-stream").set("Range", "bytes=990-");
    expect(tail.status).toBe(206);
    expect(tail.headers["content-range"]).toBe("bytes 990-999/1000");
  });
});

describe("errors", () => {
  it("404 for a missing file", async () => {
    const res = await api.get(enc("/nope/missing"));
    expect(res.status).toBe(404);
    expect(res.body.error).toMatch(/\/nope\/missing: no such file or directory/);
  });
  it("reading or writing through a symlink that leaves the root never reaches outside: 403 (path-checks) or under the root (openat2)", async () => {
    // path-checks: a host path outside the root is refused; openat2: the same target is a sandbox path, under the root.
    const [read, write] = kernelConfined(agent) ? [404, 200] : [403, 403];
    expect((await api.get(enc("/out/secret.txt"))).status).toBe(read);
    expect((await api.get(enc("/secret-link"))).status).toBe(read);
    expect((await api.put(enc("/secret-link")).send({ content: "pwned" })).status).toBe(write);
    expect((await api.put(enc("/out/new.txt")).send({ content: "pwned" })).status).toBe(write);
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("top secret");
    expect(existsSync(join(outside, "new.txt"))).toBe(false);
    if (kernelConfined(agent)) {
      expect(readFileSync(join(agent.root, outside, "secret.txt"), "utf8")).toBe("pwned");
      expect(readFileSync(join(agent.root, outside, "new.txt"), "utf8")).toBe("pwned");
    }
  });
  it("403 for .. climbing above the root", async () => {
    const res = await api.get("/filesystem/..%2F..%2F..%2Fetc%2Fpasswd");
    expect(res.status).toBe(403);
    expect(res.body.error).toMatch(/escapes the sandbox root/);
  });
  it("409 writing a file over a directory, 409 creating a directory over a file, 400 under a file", async () => {
    await api.put(enc("/clash/dir")).send({ isDirectory: true });
    await api.put(enc("/clash/file")).send({ content: "x" });
    expect((await api.put(enc("/clash/dir")).send({ content: "x" })).status).toBe(409);
    expect((await api.put(enc("/clash/file")).send({ isDirectory: true })).status).toBe(409);
    const under = await api.put(enc("/clash/file/child")).send({ content: "x" });
    expect(under.status).toBe(400);
    expect(under.body.error).toMatch(/not a directory/);
  });
  it("400 for a bad body, naming the field", async () => {
    const res = await api.put(enc("/bad")).send({ content: 42 });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/body\.content/);
    expect((await api.put(enc("/bad")).send({ content: "x", permissions: "999" })).status).toBe(400);
    const noFile = await api.put(enc("/bad")).field("path", "/bad");
    expect(noFile.status).toBe(400);
    expect(noFile.body.error).toMatch(/missing 'file' field/);
  });
});

describe("DELETE /filesystem/{path}", () => {
  it("deletes files, refuses a non-empty directory without recursive, deletes it with", async () => {
    await api.put(enc("/del/d/f")).send({ content: "x" });
    expect((await api.delete(enc("/del/d/f"))).body).toEqual({ message: "File deleted successfully", path: "/del/d/f" });
    await api.put(enc("/del/d/g")).send({ content: "x" });
    const refused = await api.delete(enc("/del/d"));
    // the reference daemon's answer: 422 "error deleting directory: ... directory not empty"
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatch(/^error deleting directory: \/del\/d: directory not empty.*recursive=true/);
    expect((await api.delete(`${enc("/del/d")}?recursive=true`)).status).toBe(200);
    expect(existsSync(join(agent.root, "del/d"))).toBe(false);
    expect((await api.delete(enc("/del/d"))).status).toBe(404);
  });
  it("removes a symlink itself, never its target outside the root", async () => {
    symlinkSync(outside, join(agent.root, "out-to-delete"));
    expect((await api.delete(`${enc("/out-to-delete")}?recursive=true`)).status).toBe(200);
    expect(() => lstatSync(join(agent.root, "out-to-delete"))).toThrow();
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("top secret");
  });
  it("refuses to delete the root", async () => {
    expect((await api.delete("/filesystem/")).status).toBe(403);
  });
});

/** A read-only bind mount inside the root; needs root and CAP_SYS_ADMIN. */
function readOnlyMount(root: string): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const dir = join(root, "ro");
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync("mount", ["--bind", dir, dir], { stdio: "ignore" });
    execFileSync("mount", ["-o", "remount,bind,ro", dir], { stdio: "ignore" });
    return dir;
  } catch {
    return undefined;
  }
}

describe("a write the filesystem refuses", () => {
  it("answers 403 on a read-only filesystem (EROFS) and keeps serving (skipped unless root may bind-mount)", async (ctx) => {
    const dir = readOnlyMount(agent.root);
    if (!dir) return ctx.skip();
    try {
      const res = await api.put(enc("/ro/file")).send({ content: "x" });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatch(/read-only file system/);
      expect((await api.get("/filesystem/")).status).toBe(200);
    } finally {
      execFileSync("umount", [dir]);
    }
  });
});
