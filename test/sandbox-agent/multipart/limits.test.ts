import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { agentClient } from "../../helpers/multipart.js";

let agent: TestAgent | undefined;
afterEach(async () => {
  await agent?.stop();
  agent = undefined;
});

describe("caps", () => {
  it("answers 429 beyond --max-open-uploads, and accepts again once one is aborted", async () => {
    agent = await startTestAgent({ maxOpenUploads: 2 });
    const api = agentClient(agent.url);
    const first = await api.initiate("/a");
    await api.initiate("/b");
    const third = await api.post("/filesystem-multipart/initiate/c").send({});
    expect(third.status).toBe(429);
    expect(third.body.error).toMatch(/too many open uploads \(2\)/);
    await api.delete(`/filesystem-multipart/${first}/abort`);
    expect((await api.post("/filesystem-multipart/initiate/c").send({})).status).toBe(200);
  });

  it("answers 413 for a part over --max-part-size and keeps nothing of it", async () => {
    agent = await startTestAgent({ maxPartSize: "1KiB" });
    const api = agentClient(agent.url);
    const id = await api.initiate("/big");
    const res = await api.part(id, 1, Buffer.alloc(4096, 1));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatch(/maximum size of 1024 bytes/);
    expect(readdirSync(join(agent.dataDir, "uploads", id))).toEqual([]);
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).body.parts).toEqual([]);
    // a part within the limit still works: the agent kept serving
    expect((await api.part(id, 1, Buffer.alloc(1024, 1))).status).toBe(200);
  });
});

describe("a part whose body is cut short", () => {
  it("leaves no part behind", async () => {
    agent = await startTestAgent();
    const api = agentClient(agent.url);
    const id = await api.initiate("/cut");
    const { port } = new URL(agent.url);
    const boundary = "----cut";
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`;
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write(
          `PUT /filesystem-multipart/${id}/part?partNumber=1 HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 1000000\r\n\r\n${head}`,
        );
        socket.write(Buffer.alloc(200_000, 7), () =>
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 100),
        );
      });
      socket.on("error", reject);
    });
    await expect.poll(() => readdirSync(join(agent!.dataDir, "uploads", id)), { timeout: 3_000 }).toEqual([]);
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).body.parts).toEqual([]);
  });
});

describe("expiry", () => {
  it("sweeps an upload idle longer than --upload-expiry, parts and all", async () => {
    const clock = new FakeClock("2026-03-01T00:00:00Z");
    agent = await startTestAgent({ uploadExpiryMs: 3_600_000 }, { clock });
    const api = agentClient(agent.url);
    const idle = await api.initiate("/idle");
    await api.part(idle, 1, Buffer.from("x"));
    clock.advance(50 * 60_000);
    const active = await api.initiate("/active");
    clock.advance(20 * 60_000); // idle: 70 min without activity; active: 20 min
    await expect.poll(async () => (await api.get(`/filesystem-multipart/${idle}/parts`)).status, { timeout: 3_000 }).toBe(404);
    expect(existsSync(join(agent.dataDir, "uploads", idle))).toBe(false);
    expect((await api.get(`/filesystem-multipart/${active}/parts`)).status).toBe(200);
  });

  it("counts activity: a part upload postpones expiry", async () => {
    const clock = new FakeClock("2026-03-01T00:00:00Z");
    agent = await startTestAgent({ uploadExpiryMs: 3_600_000 }, { clock });
    const api = agentClient(agent.url);
    const id = await api.initiate("/busy");
    clock.advance(50 * 60_000);
    await api.part(id, 1, Buffer.from("x"));
    clock.advance(50 * 60_000);
    expect(await agent.runtime.deps.multipart.sweepExpired()).toBe(0);
    expect((await api.get(`/filesystem-multipart/${id}/parts`)).status).toBe(200);
  });
});

/** A 1 MiB tmpfs to fill up; needs root and CAP_SYS_ADMIN. */
function smallTmpfs(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const dir = tempDir("full-");
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir], { stdio: "ignore" });
    return dir;
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}

describe("disk full", () => {
  it("answers 507 on complete, removes the temp file and keeps the destination and the upload (skipped unless root may mount tmpfs)", async (ctx) => {
    const mountPoint = smallTmpfs();
    if (!mountPoint) return ctx.skip();
    try {
      agent = await startTestAgent({ root: mountPoint });
      const api = agentClient(agent.url);
      mkdirSync(join(mountPoint, "d"));
      writeFileSync(join(mountPoint, "d", "target"), "old");
      const id = await api.initiate("/d/target");
      // parts live in the data dir (not on the tmpfs); their sum does not fit in the root
      const p1 = (await api.part(id, 1, Buffer.alloc(700_000, 1))).body;
      const p2 = (await api.part(id, 2, Buffer.alloc(700_000, 2))).body;
      const res = await api.complete(id, [p1, p2]);
      expect(res.status).toBe(507);
      expect(res.body.error).toMatch(/no space left on device/);
      expect(readdirSync(join(mountPoint, "d"))).toEqual(["target"]);
      expect(readFileSync(join(mountPoint, "d", "target"), "utf8")).toBe("old");
      expect((await api.get(`/filesystem-multipart/${id}/parts`)).body.parts).toHaveLength(2);
    } finally {
      await agent?.stop();
      agent = undefined;
      execFileSync("umount", ["-l", mountPoint]);
      rmSync(mountPoint, { recursive: true, force: true });
    }
  });
});
