import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/** The development-only symlink backend: needs no privilege, so these always run. */
describe("drives, symlink backend", () => {
  const started: TestAgent[] = [];
  async function agent(config: Record<string, unknown> = {}): Promise<TestAgent> {
    const a = await startTestAgent({ driveBackend: "symlink", ...config });
    started.push(a);
    return a;
  }
  const host = (a: TestAgent, p: string) => join(a.root, p);
  const mount = (a: TestAgent, body: Record<string, unknown>) => request(a.url).post("/drives/mount").send(body);
  const list = async (a: TestAgent) => (await request(a.url).get("/drives/mount").expect(200)).body.mounts;

  afterEach(async () => {
    for (const a of started.splice(0)) await a.stop();
  });

  it("attaches a drive as a symlink into the drives dir and reports the backend", async () => {
    const a = await agent();
    const res = await mount(a, { driveName: "dev", mountPath: "/home/me/dev", drivePath: "/src" }).expect(200);
    expect(res.body).toMatchObject({ success: true, backend: "symlink", mountPath: "/home/me/dev", drivePath: "/src", readOnly: false });
    expect(lstatSync(host(a, "/home/me/dev")).isSymbolicLink()).toBe(true);
    expect(readlinkSync(host(a, "/home/me/dev"))).toBe(join(a.dataDir, "drives", "dev", "src"));
    writeFileSync(join(host(a, "/home/me/dev"), "a.txt"), "x");
    expect(readFileSync(join(a.dataDir, "drives", "dev", "src", "a.txt"), "utf8")).toBe("x");
    expect(await list(a)).toEqual([{ driveName: "dev", mountPath: "/home/me/dev", drivePath: "/src", readOnly: false, backend: "symlink" }]);
  });

  it("refuses readOnly, which a symlink cannot enforce, with 400 naming the field", async () => {
    const a = await agent();
    expect((await mount(a, { driveName: "d", mountPath: "/mnt/ro", readOnly: true }).expect(400)).body.error).toMatch(/^readOnly: .*symlink/);
    expect(existsSync(host(a, "/mnt/ro"))).toBe(false);
  });

  it("cannot shadow an existing directory: 409, and the directory is left alone", async () => {
    const a = await agent();
    mkdirSync(host(a, "/srv/here"), { recursive: true });
    writeFileSync(host(a, "/srv/here/keep.txt"), "k");
    expect((await mount(a, { driveName: "d", mountPath: "/srv/here" }).expect(409)).body.error).toMatch(/^mountPath: .*already exists/);
    expect(readFileSync(host(a, "/srv/here/keep.txt"), "utf8")).toBe("k");
  });

  it("follows the same idempotency, conflict and 404 rules, and removes what it created", async () => {
    const a = await agent();
    await mount(a, { driveName: "d", mountPath: "/mnt/x" }).expect(200);
    expect((await mount(a, { driveName: "d", mountPath: "/mnt/x" }).expect(200)).body.message).toBe("Drive already mounted");
    await mount(a, { driveName: "e", mountPath: "/mnt/x" }).expect(409);
    await mount(a, { driveName: "e", mountPath: "/mnt/x/y" }).expect(400);
    await request(a.url).delete("/drives/mount/mnt%2Fx").expect(200);
    expect(existsSync(host(a, "/mnt"))).toBe(false);
    await request(a.url).delete("/drives/mount/mnt%2Fx").expect(404);
  });

  it("does not list a link that was removed or replaced behind its back", async () => {
    const a = await agent();
    await mount(a, { driveName: "d", mountPath: "/mnt/gone" }).expect(200);
    unlinkSync(host(a, "/mnt/gone"));
    expect(await list(a)).toEqual([]);
  });

  it("is adopted by a restarted agent", async () => {
    const first = await startTestAgent({ driveBackend: "symlink" });
    try {
      await mount(first, { driveName: "d", mountPath: "/mnt/keep" }).expect(200);
      await first.stop({ keepFiles: true });
      const second = await agent({ root: first.root, dataDir: first.dataDir });
      expect(await list(second)).toEqual([{ driveName: "d", mountPath: "/mnt/keep", drivePath: "/", readOnly: false, backend: "symlink" }]);
      await request(second.url).delete("/drives/mount/mnt/keep").expect(200);
      expect(existsSync(host(second, "/mnt/keep"))).toBe(false);
    } finally {
      rmSync(dirname(first.root), { recursive: true, force: true });
    }
  });
});
