import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { sandboxAt } from "../../helpers/sdk.js";

const TOKEN = "sdk-token";
let agent: TestAgent;
let sandbox: Awaited<ReturnType<typeof sandboxAt>>;
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  // The SDK sends BL_API_KEY as `X-Blaxel-Authorization: Bearer <key>`.
  sandbox = await sandboxAt(agent.url, "sdk", { apiKey: TOKEN });
});
afterAll(() => agent.stop());

describe("@blaxel/core sandbox.fs against the agent", () => {
  it("write, read, ls, mkdir and rm work unmodified", async () => {
    await sandbox.fs.mkdir("/work/dir");
    await sandbox.fs.write("/work/hello.txt", "hello from the sdk");
    expect(await sandbox.fs.read("/work/hello.txt")).toBe("hello from the sdk");
    const listing = await sandbox.fs.ls("/work");
    expect(listing.files?.map((f) => f.name)).toEqual(["hello.txt"]);
    expect(listing.subdirectories?.map((d) => d.name)).toEqual(["dir"]);
    await sandbox.fs.rm("/work/hello.txt");
    await expect(sandbox.fs.read("/work/hello.txt")).rejects.toThrow(/404/);
  });

  it("writeBinary of a file over 5 MiB takes the multipart path and reads back byte-identical", async () => {
    const data = randomBytes(12 * 1024 * 1024 + 12_345); // 3 parts: 5 MiB, 5 MiB, remainder
    const result = await sandbox.fs.writeBinary("/big/blob.bin", data);
    // only a multipart complete answers an S3-style etag with the part count
    expect(result).toMatchObject({ path: "/big/blob.bin", size: data.length, etag: expect.stringMatching(/-3$/) });
    expect(sha(readFileSync(join(agent.root, "big/blob.bin")))).toBe(sha(data));
    const blob = await sandbox.fs.readBinary("/big/blob.bin");
    expect(sha(new Uint8Array(await blob.arrayBuffer()))).toBe(sha(data));
    // nothing left open on the agent
    expect((await agent.runtime.deps.multipart.listUploads()).uploads).toEqual([]);
  });

  it("write of a string over 5 MiB also goes through multipart", async () => {
    const text = "0123456789abcdef".repeat(400_000); // 6.4 MB
    await sandbox.fs.write("/big/text.txt", text);
    expect(readFileSync(join(agent.root, "big/text.txt"), "utf8")).toBe(text);
  });

  it("surfaces the agent's errors", async () => {
    await expect(sandbox.fs.read("/../etc/passwd")).rejects.toThrow(/403/);
  });
});
