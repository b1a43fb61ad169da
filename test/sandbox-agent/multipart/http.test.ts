import { existsSync, readdirSync, readFileSync, writeFileSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kernelConfined, startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { agentClient, md5 } from "../../helpers/multipart.js";

const TOKEN = "test-token";
let agent: TestAgent;
let api: ReturnType<typeof agentClient>;
let n = 0;
const unique = (name: string) => `/up/${++n}-${name}`;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  api = agentClient(agent.url, TOKEN);
});
afterAll(() => agent.stop());

const partFiles = (uploadId: string) => readdirSync(join(agent.dataDir, "uploads", uploadId));

describe("POST /filesystem-multipart/initiate/{path}", () => {
  it("returns an uploadId and the normalized sandbox path, for SDK-encoded and plain paths", async () => {
    const encoded = await api.post(`/filesystem-multipart/initiate/${encodeURIComponent("/tmp//a/./b.bin")}`).send({ permissions: "0644" });
    expect(encoded.status).toBe(200);
    expect(encoded.body).toEqual({ uploadId: expect.any(String), path: "/tmp/a/b.bin" });
    const plain = await api.post("/filesystem-multipart/initiate/tmp/c.bin").send();
    expect(plain.body.path).toBe("/tmp/c.bin");
  });
  it("needs the token", async () => {
    const res = await agentClient(agent.url).post("/filesystem-multipart/initiate/x").send({});
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: expect.stringMatching(/bearer/i) });
  });
  it("rejects bad permissions with 400", async () => {
    const res = await api.post("/filesystem-multipart/initiate/x").send({ permissions: "rwx" });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/permissions/);
  });
  it("refuses a path escaping the root with 403 by ..; by symlink 403 (path-checks) or confined under the root (openat2)", async () => {
    expect((await api.post("/filesystem-multipart/initiate/..%2F..%2Fetc%2Fpasswd").send({})).status).toBe(403);
    symlinkSync(tempDir(), join(agent.root, "escape"));
    const res = await api.post(`/filesystem-multipart/initiate/${encodeURIComponent("/escape/x")}`).send({});
    expect(res.status).toBe(kernelConfined(agent) ? 200 : 403);
  });
  it("refuses a destination that is a directory with 409", async () => {
    mkdirSync(join(agent.root, "adir"), { recursive: true });
    expect((await api.post("/filesystem-multipart/initiate/adir").send({})).status).toBe(409);
  });
});

describe("PUT /filesystem-multipart/{uploadId}/part", () => {
  it("stores a part and answers its MD5 etag and size", async () => {
    const id = await api.initiate(unique("p"));
    const data = Buffer.from("hello part");
    const res = await api.part(id, 1, data);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ partNumber: 1, etag: md5(data), size: data.length });
  });
  it("accepts a zero-byte part", async () => {
    const id = await api.initiate(unique("z"));
    const res = await api.part(id, 1, Buffer.alloc(0));
    expect(res.body).toMatchObject({ etag: md5(""), size: 0 });
  });
  it("answers 404 for an unknown upload", async () => {
    const res = await api.part("no-such-upload", 1, Buffer.from("x"));
    expect(res.status).toBe(404);
    expect(res.body.error).toMatch(/upload not found: no-such-upload/);
  });
  it.each([["0"], ["10001"], ["abc"], ["-1"], ["1.5"]])("answers 400 for partNumber=%s", async (pn) => {
    const id = await api.initiate(unique("bad"));
    const res = await api.part(id, pn, Buffer.from("x"));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/partNumber/);
  });
  it("answers 400 when partNumber is missing", async () => {
    const id = await api.initiate(unique("missing"));
    const res = await api.put(`/filesystem-multipart/${id}/part`).attach("file", Buffer.from("x"), "blob");
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/partNumber: query parameter is required/);
  });
  it("answers 400 without a file field or with a non-multipart body", async () => {
    const id = await api.initiate(unique("nofile"));
    const noFile = await api.put(`/filesystem-multipart/${id}/part?partNumber=1`).field("other", "x");
    expect(noFile.status).toBe(400);
    expect(noFile.body.error).toMatch(/missing 'file' field/);
    const json = await api.put(`/filesystem-multipart/${id}/part?partNumber=1`).send({ file: "x" });
    expect(json.status).toBe(400);
    expect(partFiles(id)).toEqual([]);
  });
  it("replaces a re-uploaded part: new etag, old bytes gone", async () => {
    const path = unique("re");
    const id = await api.initiate(path);
    await api.part(id, 1, Buffer.from("first version"));
    const second = await api.part(id, 1, Buffer.from("second"));
    expect(second.body.etag).toBe(md5("second"));
    expect(partFiles(id)).toHaveLength(1);
    expect((await api.complete(id, [second.body])).status).toBe(200);
    expect(readFileSync(join(agent.root, path), "utf8")).toBe("second");
  });
});

describe("POST /filesystem-multipart/{uploadId}/complete", () => {
  async function twoParts(path: string) {
    const id = await api.initiate(path);
    const a = Buffer.alloc(70_000, "a");
    const b = Buffer.from("tail");
    // uploaded out of order: assembly follows part numbers
    const p2 = (await api.part(id, 2, b)).body;
    const p1 = (await api.part(id, 1, a)).body;
    return { id, p1, p2, content: Buffer.concat([a, b]) };
  }

  it("assembles the parts in order, atomically, and forgets the upload", async () => {
    const path = unique("done.bin");
    const { id, p1, p2, content } = await twoParts(path);
    const res = await api.complete(id, [p1, p2]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ message: expect.stringMatching(/success/), path, size: content.length, etag: expect.stringMatching(/-2$/) });
    expect(readFileSync(join(agent.root, path)).equals(content)).toBe(true);
    expect(existsSync(join(agent.dataDir, "uploads", id))).toBe(false);
    expect((await api.complete(id, [p1, p2])).status).toBe(404);
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).status).toBe(404);
    expect((await api.delete(`/filesystem-multipart/${id}/abort`)).status).toBe(404);
    expect((await api.part(id, 3, Buffer.from("late"))).status).toBe(404);
  });
  it("applies the upload's permissions", async () => {
    const path = unique("mode.bin");
    const id = await api.initiate(path, { permissions: "0600" });
    const p = (await api.part(id, 1, Buffer.from("x"))).body;
    await api.complete(id, [p]);
    const res = await api.get(`/filesystem/${encodeURIComponent(path)}`);
    expect(res.body.permissions).toBe("600");
  });
  it("accepts S3-style quoted etags", async () => {
    const { id, p1, p2 } = await twoParts(unique("quoted"));
    const res = await api.complete(id, [{ ...p1, etag: `"${p1.etag}"` }, p2]);
    expect(res.status).toBe(200);
  });
  it("answers 404 for an unknown upload", async () => {
    expect((await api.complete("nope", [{ partNumber: 1, etag: "x" }])).status).toBe(404);
  });
  it.each([
    ["an empty list", () => [], /at least one part/],
    ["a descending list", (p1: any, p2: any) => [p2, p1], /ascending/],
    ["a duplicate part", (p1: any) => [p1, p1], /ascending partNumber order without duplicates/],
  ])("answers 400 for %s", async (_label, parts, message) => {
    const { id, p1, p2 } = await twoParts(unique("list"));
    const res = await api.complete(id, (parts as (a: unknown, b: unknown) => { partNumber: number; etag: string }[])(p1, p2));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(message);
  });
  it("answers 400 naming a part never uploaded, and keeps the upload for a retry", async () => {
    const path = unique("retry");
    const { id, p1, p2, content } = await twoParts(path);
    const res = await api.complete(id, [p1, p2, { partNumber: 3, etag: md5("x") }]);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/part 3 was never uploaded/);
    expect(existsSync(join(agent.root, path))).toBe(false);
    expect((await api.complete(id, [p1, p2])).status).toBe(200);
    expect(readFileSync(join(agent.root, path)).equals(content)).toBe(true);
  });
  it("answers 400 naming the part on an etag mismatch, leaving a pre-existing destination untouched", async () => {
    const path = unique("mismatch");
    mkdirSync(join(agent.root, "up"), { recursive: true });
    writeFileSync(join(agent.root, path), "old content");
    const { id, p1, p2 } = await twoParts(path);
    const res = await api.complete(id, [p1, { ...p2, etag: md5("other") }]);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/etag mismatch for part 2/);
    expect(readFileSync(join(agent.root, path), "utf8")).toBe("old content");
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).body.parts).toHaveLength(2);
  });
  it("lets only one of two concurrent completes assemble", async () => {
    const path = unique("race");
    const { id, p1, p2, content } = await twoParts(path);
    const results = await Promise.all([api.complete(id, [p1, p2]), api.complete(id, [p1, p2]), api.complete(id, [p1, p2])]);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.every((s) => s === 200 || s === 409 || s === 404)).toBe(true);
    expect(readFileSync(join(agent.root, path)).equals(content)).toBe(true);
    expect(readdirSync(join(agent.root, "up")).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  });
  it("answers 400 naming the field for a malformed body", async () => {
    const id = await api.initiate(unique("malformed"));
    const res = await api.post(`/filesystem-multipart/${id}/complete`).send({ parts: [{ partNumber: "one", etag: 1 }] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/body\.parts\[0\]\.partNumber/);
    const bad = await api.post(`/filesystem-multipart/${id}/complete`).set("Content-Type", "application/json").send("{not json");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/invalid JSON/);
  });
});

describe("DELETE /filesystem-multipart/{uploadId}/abort", () => {
  it("removes the upload and every part from disk", async () => {
    const path = unique("abort");
    const id = await api.initiate(path);
    await api.part(id, 1, Buffer.from("a"));
    await api.part(id, 2, Buffer.from("b"));
    const res = await api.delete(`/filesystem-multipart/${id}/abort`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.stringMatching(/aborted/), path });
    expect(existsSync(join(agent.dataDir, "uploads", id))).toBe(false);
    expect((await api.part(id, 3, Buffer.from("c"))).status).toBe(404);
    expect(existsSync(join(agent.root, path))).toBe(false);
  });
  it("answers 404 for an unknown upload", async () => {
    expect((await api.delete("/filesystem-multipart/nope/abort")).status).toBe(404);
  });
});

describe("listing", () => {
  it("lists parts in order and open uploads with parts keyed by number", async () => {
    const path = unique("list");
    const id = await api.initiate(path);
    await api.part(id, 3, Buffer.from("c"));
    await api.part(id, 1, Buffer.from("a"));
    const parts = await api.get(`/filesystem-multipart/${id}/parts`);
    expect(parts.body).toMatchObject({ uploadId: id, path, parts: [{ partNumber: 1, etag: md5("a"), size: 1 }, { partNumber: 3 }] });
    const uploads = await api.get("/filesystem-multipart");
    const mine = uploads.body.uploads.find((u: { uploadId: string }) => u.uploadId === id);
    expect(mine).toMatchObject({ path, permissions: 0o644, parts: { "1": { etag: md5("a") }, "3": { etag: md5("c") } } });
    expect(new Date(mine.expiresAt).getTime()).toBeGreaterThan(new Date(mine.initiatedAt).getTime());
  });
});
