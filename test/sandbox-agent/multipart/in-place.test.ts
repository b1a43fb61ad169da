import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { agentClient } from "../../helpers/multipart.js";

let agent: TestAgent;
let api: ReturnType<typeof agentClient>;
let n = 0;
beforeAll(async () => {
  agent = await startTestAgent();
  api = agentClient(agent.url);
});
afterAll(() => agent.stop());

const STRIDE = 64 * 1024;
const chunk = (byte: number, size = STRIDE) => Buffer.alloc(size, byte);
const uploadDir = (id: string) => join(agent.dataDir, "uploads", id);

async function upload(sizes: number[]) {
  const path = `/inplace/${++n}.bin`;
  const id = await api.initiate(path);
  const parts = [];
  for (let i = 0; i < sizes.length; i++) parts.push((await api.part(id, i + 1, chunk(i + 1, sizes[i]))).body);
  return { id, path, parts, expected: Buffer.concat(sizes.map((size, i) => chunk(i + 1, size))) };
}

describe("parts written in place (stride = size of part 1)", () => {
  it("writes parts after the first into the data file, and completes by renaming it", async () => {
    const { id, path, parts, expected } = await upload([STRIDE, STRIDE, STRIDE, 1000]);
    expect(readdirSync(uploadDir(id)).sort()).toEqual(["data", expect.stringMatching(/^part-1\./)]);
    const res = await api.complete(id, parts);
    expect(res.body).toMatchObject({ size: expected.length });
    expect(readFileSync(join(agent.root, path)).equals(expected)).toBe(true);
  });

  it("gives a re-uploaded part a file of its own and completes with the new bytes", async () => {
    const { id, path, parts } = await upload([STRIDE, STRIDE, 10]);
    const again = (await api.part(id, 2, chunk(9))).body;
    expect(readdirSync(uploadDir(id))).toHaveLength(3); // part-1, data, part-2 (re-upload)
    await api.complete(id, [parts[0], again, parts[2]]);
    expect(readFileSync(join(agent.root, path)).equals(Buffer.concat([chunk(1), chunk(9), chunk(3, 10)]))).toBe(true);
  });

  it("spills a part larger than the stride to a file of its own", async () => {
    const { id, path, parts, expected } = await upload([STRIDE, STRIDE * 2 + 5, 7]);
    const res = await api.complete(id, parts);
    expect(res.status).toBe(200);
    expect(readFileSync(join(agent.root, path)).equals(expected)).toBe(true);
  });

  it("falls back to copying when the listed parts are not 1..k", async () => {
    const { id, path, parts } = await upload([STRIDE, STRIDE, STRIDE]);
    await api.complete(id, [parts[0], parts[2]]);
    expect(readFileSync(join(agent.root, path)).equals(Buffer.concat([chunk(1), chunk(3)]))).toBe(true);
  });

  it("does not cut away a recorded part beyond the listed ones", async () => {
    const { id, path, parts } = await upload([STRIDE, STRIDE, STRIDE]);
    // complete 1..2 fails on a bad etag first: part 3 must still be intact for the retry
    expect((await api.complete(id, [parts[0], { ...parts[1], etag: "0".repeat(32) }])).status).toBe(400);
    const ok = await api.complete(id, [parts[0], parts[1], parts[2]]);
    expect(ok.status).toBe(200);
    expect(readFileSync(join(agent.root, path)).equals(Buffer.concat([chunk(1), chunk(2), chunk(3)]))).toBe(true);
    expect(existsSync(uploadDir(id))).toBe(false);
  });

  it("completes only the listed prefix when parts beyond it were uploaded", async () => {
    const { id, path, parts } = await upload([STRIDE, STRIDE, STRIDE]);
    await api.complete(id, [parts[0], parts[1]]);
    expect(readFileSync(join(agent.root, path)).equals(Buffer.concat([chunk(1), chunk(2)]))).toBe(true);
  });
});
