import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startTestAgent, tempDir } from "../../helpers/agent.js";
import { spawnAgent } from "../../helpers/agent-process.js";
import { agentClient } from "../../helpers/multipart.js";

describe("uploads survive a restart", () => {
  it("after a clean stop, a new agent on the same data dir lists, continues and completes the upload", async () => {
    const first = await startTestAgent();
    const api1 = agentClient(first.url);
    const id = await api1.initiate("/restart/file.bin");
    const p1 = (await api1.part(id, 1, Buffer.alloc(100_000, "a"))).body;
    await first.stop({ keepFiles: true });

    const second = await startTestAgent({ root: first.root, dataDir: first.dataDir });
    try {
      const api2 = agentClient(second.url);
      const listed = (await api2.get("/filesystem-multipart")).body.uploads;
      expect(listed).toEqual([
        expect.objectContaining({ uploadId: id, path: "/restart/file.bin", parts: { "1": expect.objectContaining({ etag: p1.etag }) } }),
      ]);
      const p2 = (await api2.part(id, 2, Buffer.from("end"))).body;
      expect((await api2.complete(id, [p1, p2])).status).toBe(200);
      expect(readFileSync(join(second.root, "restart/file.bin")).length).toBe(100_003);
    } finally {
      await second.stop();
    }
  });

  it("after kill -9, every acknowledged part is still there and the upload completes", async () => {
    const base = tempDir();
    const args = ["--root", join(base, "root"), "--data-dir", join(base, "data"), "--token", "tok"];
    const first = await spawnAgent(args);
    const api1 = agentClient(first.url, "tok");
    const id = await api1.initiate("/crash/file.bin");
    const parts = [];
    for (let n = 1; n <= 3; n++) parts.push((await api1.part(id, n, Buffer.alloc(300_000, n))).body);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await spawnAgent(args);
    try {
      const api2 = agentClient(second.url, "tok");
      const listed = await api2.get(`/filesystem-multipart/${id}/parts`);
      expect(listed.body.parts.map((p: { etag: string }) => p.etag)).toEqual(parts.map((p) => p.etag));
      const done = await api2.complete(id, parts);
      expect(done.status).toBe(200);
      expect(done.body.size).toBe(900_000);
      const bytes = readFileSync(join(base, "root/crash/file.bin"));
      expect(bytes.subarray(299_999, 300_001)).toEqual(Buffer.from([1, 2]));
    } finally {
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    }
  });
});
