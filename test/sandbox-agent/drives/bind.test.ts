import { spawn, spawnSync } from "node:child_process";
import { chownSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { kernelConfined, startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { MOUNT, SKIP_REASON, mountsAt, unmountUnder } from "./helpers.js";

/**
 * HTTP tests of every drive rule against the bind backend: real bind mounts
 * under temp dirs, checked in /proc/self/mountinfo. Skipped (with the reason
 * in the suite name and a warning) where this process may not mount.
 */
describe.skipIf(!MOUNT.ok)(`drives, bind backend${SKIP_REASON}`, () => {
  const started: TestAgent[] = [];
  const bases: string[] = [];

  async function agent(config: Record<string, unknown> = {}): Promise<TestAgent> {
    const a = await startTestAgent({ driveBackend: "bind", ...config });
    started.push(a);
    bases.push(dirname(a.root));
    return a;
  }
  const host = (a: TestAgent, sandboxPath: string) => join(a.root, sandboxPath);
  const drives = (a: TestAgent) => join(a.dataDir, "drives");
  const mount = (a: TestAgent, body: Record<string, unknown>) => request(a.url).post("/drives/mount").send(body);
  const unmount = (a: TestAgent, path: string) => request(a.url).delete(`/drives/mount/${path}`);
  const list = async (a: TestAgent) => (await request(a.url).get("/drives/mount").expect(200)).body.mounts;

  afterEach(async () => {
    const dirs = bases.splice(0);
    for (const base of dirs) unmountUnder(base);
    for (const a of started.splice(0)) await a.stop();
    for (const base of dirs) rmSync(base, { recursive: true, force: true });
  });

  it("mounts a real bind mount, reports it, and unmounts it", async () => {
    const a = await agent();
    const res = await mount(a, { driveName: "data", mountPath: "/mnt/data" }).expect(200);
    expect(res.body).toEqual({
      success: true,
      message: "Drive mounted successfully",
      driveName: "data",
      mountPath: "/mnt/data",
      drivePath: "/",
      readOnly: false,
      backend: "bind",
    });
    expect(mountsAt(host(a, "/mnt/data"))).toHaveLength(1);
    writeFileSync(join(host(a, "/mnt/data"), "hello.txt"), "through the mount");
    expect(readFileSync(join(drives(a), "data", "hello.txt"), "utf8")).toBe("through the mount");
    expect(await list(a)).toEqual([{ driveName: "data", mountPath: "/mnt/data", drivePath: "/", readOnly: false, backend: "bind" }]);

    const gone = await unmount(a, "mnt%2Fdata").expect(200);
    expect(gone.body).toEqual({ success: true, message: "Drive unmounted successfully", mountPath: "/mnt/data" });
    expect(mountsAt(host(a, "/mnt/data"))).toHaveLength(0);
    expect(await list(a)).toEqual([]);
    expect(readFileSync(join(drives(a), "data", "hello.txt"), "utf8")).toBe("through the mount");
  });

  it("creates drivePath inside the drive and mounts only that sub-directory", async () => {
    const a = await agent();
    const res = await mount(a, { driveName: "proj", mountPath: "/work/a", drivePath: "team/a/" }).expect(200);
    expect(res.body.drivePath).toBe("/team/a");
    expect(statSync(join(drives(a), "proj", "team", "a")).isDirectory()).toBe(true);
    writeFileSync(join(host(a, "/work/a"), "f"), "x");
    expect(existsSync(join(drives(a), "proj", "team", "a", "f"))).toBe(true);
    expect(existsSync(join(drives(a), "proj", "f"))).toBe(false);
  });

  it("echoes sandbox paths, never host paths, in responses, lists and errors", async () => {
    const a = await agent();
    const ok = await mount(a, { driveName: "d", mountPath: "//srv//d/" }).expect(200);
    expect(ok.body.mountPath).toBe("/srv/d");
    const conflict = await mount(a, { driveName: "other", mountPath: "/srv/d" }).expect(409);
    expect(JSON.stringify([ok.body, conflict.body, await list(a)])).not.toContain(a.root);
  });

  it.each([
    [{ mountPath: "/mnt/x" }, /driveName/],
    [{ driveName: "-bad", mountPath: "/mnt/x" }, /^driveName: /],
    [{ driveName: "a b", mountPath: "/mnt/x" }, /^driveName: /],
    [{ driveName: "x".repeat(129), mountPath: "/mnt/x" }, /^driveName: /],
    [{ driveName: "d" }, /mountPath/],
    [{ driveName: "d", mountPath: "mnt/x" }, /^mountPath: .*absolute/],
    [{ driveName: "d", mountPath: "/mnt/../x" }, /^mountPath: /],
    [{ driveName: "d", mountPath: "/" }, /^mountPath: .*root/],
    [{ driveName: "d", mountPath: "/proc/x" }, /^mountPath: .*system path/],
    [{ driveName: "d", mountPath: "/etc" }, /^mountPath: .*system path/],
    [{ driveName: "d", mountPath: "/usr/local/bin" }, /^mountPath: .*system path/],
    [{ driveName: "d", mountPath: "/run" }, /^mountPath: .*system path/],
    [{ driveName: "d", mountPath: "/mnt/x", drivePath: "/a/../../etc" }, /^drivePath: /],
    [{ driveName: "d", mountPath: "/mnt/x", readOnly: "yes" }, /readOnly/],
    [{ driveName: "d", mountPath: "/mnt/x", uidMap: "1000" }, /^uidMap: /],
  ])("refuses %j with 400 naming the field", async (body, message) => {
    const a = await agent();
    const res = await mount(a, body).expect(400);
    expect(res.body.error).toMatch(message);
    expect(existsSync(host(a, "/mnt/x"))).toBe(false);
  });

  it("refuses mount paths that reach a system path or leave the root through a symlink", async () => {
    const a = await agent();
    const outside = tempDir("drives-outside-");
    try {
      symlinkSync(outside, host(a, "/escape"));
      mkdirSync(host(a, "/etc"));
      symlinkSync("etc", host(a, "/config"));
      if (kernelConfined(a)) {
        // openat2: the link's host target is a sandbox path, under the root: the mount lands there, never outside.
        await mount(a, { driveName: "d", mountPath: "/escape/x" }).expect(200);
        expect(mountsAt(host(a, join(outside, "x")))).toHaveLength(1);
        await request(a.url)
          .delete(`/drives/mount/${encodeURIComponent("/escape/x")}`)
          .expect(200);
      } else {
        expect((await mount(a, { driveName: "d", mountPath: "/escape/x" }).expect(400)).body.error).toMatch(/^mountPath: .*outside the sandbox root/);
      }
      expect((await mount(a, { driveName: "d", mountPath: "/config/x" }).expect(400)).body.error).toMatch(/^mountPath: .*system path/);
      symlinkSync("/tmp", host(a, "/final-link"));
      expect((await mount(a, { driveName: "d", mountPath: "/final-link" }).expect(400)).body.error).toMatch(/^mountPath: .*symbolic link/);
      writeFileSync(host(a, "/a-file"), "x");
      expect((await mount(a, { driveName: "d", mountPath: "/a-file" }).expect(400)).body.error).toMatch(/^mountPath: .*not a directory/);
      expect(existsSync(join(outside, "x"))).toBe(false);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it("refuses a drivePath that goes through a symlink planted inside the drive", async () => {
    const a = await agent();
    mkdirSync(join(drives(a), "shared"), { recursive: true });
    symlinkSync("/etc", join(drives(a), "shared", "evil"));
    const res = await mount(a, { driveName: "shared", mountPath: "/mnt/s", drivePath: "/evil" }).expect(400);
    expect(res.body.error).toMatch(/^drivePath: .*symbolic link/);
    expect(mountsAt(host(a, "/mnt/s"))).toHaveLength(0);
    expect(existsSync(host(a, "/mnt/s"))).toBe(false);
  });

  it("refuses mount paths over the agent's own data directory", async () => {
    const base = tempDir();
    bases.push(base);
    const a = await agent({ root: join(base, "root"), dataDir: join(base, "root", "var", "agent") });
    expect((await mount(a, { driveName: "d", mountPath: "/var" }).expect(400)).body.error).toMatch(/^mountPath: .*data directory/);
    expect((await mount(a, { driveName: "d", mountPath: "/var/agent/drives/x" }).expect(400)).body.error).toMatch(/^mountPath: .*data directory/);
  });

  it("refuses a mount inside or above another drive the agent mounted", async () => {
    const a = await agent();
    await mount(a, { driveName: "d", mountPath: "/mnt/a" }).expect(200);
    expect((await mount(a, { driveName: "e", mountPath: "/mnt/a/b" }).expect(400)).body.error).toMatch(/^mountPath: \/mnt\/a\/b is inside \/mnt\/a/);
    expect((await mount(a, { driveName: "e", mountPath: "/mnt" }).expect(400)).body.error).toMatch(/^mountPath: \/mnt is above \/mnt\/a/);
    await mount(a, { driveName: "e", mountPath: "/mnt/ab" }).expect(200);
  });

  it("is idempotent for the same drive and drivePath, 409 for anything else at that path", async () => {
    const a = await agent();
    await mount(a, { driveName: "d", mountPath: "/mnt/x", drivePath: "/p" }).expect(200);
    const again = await mount(a, { driveName: "d", mountPath: "/mnt/x/", drivePath: "p/" }).expect(200);
    expect(again.body).toMatchObject({ success: true, message: "Drive already mounted", mountPath: "/mnt/x", drivePath: "/p" });
    expect(mountsAt(host(a, "/mnt/x"))).toHaveLength(1);
    expect((await mount(a, { driveName: "other", mountPath: "/mnt/x" }).expect(409)).body.error).toMatch(
      /^mountPath: \/mnt\/x is already in use: drive d \(drivePath=\/p\)/,
    );
    expect((await mount(a, { driveName: "d", mountPath: "/mnt/x", drivePath: "/q" }).expect(409)).body.error).toMatch(/already in use/);
    expect((await mount(a, { driveName: "d", mountPath: "/mnt/x", drivePath: "/p", readOnly: true }).expect(409)).body.error).toMatch(/readOnly=false/);
    expect(mountsAt(host(a, "/mnt/x"))).toHaveLength(1);
  });

  it("serialises concurrent mounts: one mount per path, the rest idempotent or refused, nesting refused", async () => {
    const a = await agent();
    const results = await Promise.all(Array.from({ length: 6 }, () => mount(a, { driveName: "d", mountPath: "/mnt/race" })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(results.filter((r) => r.body.message === "Drive mounted successfully")).toHaveLength(1);
    expect(mountsAt(host(a, "/mnt/race"))).toHaveLength(1);
    const mixed = await Promise.all([mount(a, { driveName: "p", mountPath: "/mnt/mixed" }), mount(a, { driveName: "q", mountPath: "/mnt/mixed" })]);
    expect(mixed.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(mountsAt(host(a, "/mnt/mixed"))).toHaveLength(1);
    // Different paths take different locks, yet nesting is still refused.
    const nested = await Promise.all([mount(a, { driveName: "o", mountPath: "/mnt/n" }), mount(a, { driveName: "i", mountPath: "/mnt/n/inner" })]);
    expect(nested.map((r) => r.status).sort()).toEqual([200, 400]);
    expect(mountsAt(host(a, "/mnt/n")).length + mountsAt(host(a, "/mnt/n/inner")).length).toBe(1);
  });

  it("answers 409 for a mount point occupied by a mount the agent does not manage", async () => {
    const a = await agent();
    const other = tempDir("drives-foreign-");
    mkdirSync(host(a, "/mnt/foreign"), { recursive: true });
    const bound = spawnSyncOk("mount", ["--bind", other, host(a, "/mnt/foreign")]);
    try {
      expect(bound).toBe(0);
      expect((await mount(a, { driveName: "d", mountPath: "/mnt/foreign" }).expect(409)).body.error).toMatch(/^mountPath: .*not manage/);
      expect((await unmount(a, "mnt/foreign").expect(404)).body.error).toMatch(/^mountPath: no drive is mounted at \/mnt\/foreign/);
      expect(mountsAt(host(a, "/mnt/foreign"))).toHaveLength(1);
    } finally {
      spawnSyncOk("umount", [host(a, "/mnt/foreign")]);
      rmSync(other, { recursive: true, force: true });
    }
  });

  it("accepts every spelling of the unmount path; 404 when nothing is mounted; 400 without a path", async () => {
    const a = await agent();
    for (const spelling of ["mnt%2Fdata", "mnt/data", "/mnt/data", "%2Fmnt%2Fdata", "mnt/data/"]) {
      await mount(a, { driveName: "data", mountPath: "/mnt/data" }).expect(200);
      await unmount(a, spelling).expect(200);
      expect(mountsAt(host(a, "/mnt/data"))).toHaveLength(0);
    }
    expect((await unmount(a, "mnt%2Fdata").expect(404)).body.error).toBe("mountPath: no drive is mounted at /mnt/data");
    expect((await unmount(a, "never/mounted").expect(404)).body.error).toMatch(/^mountPath: /);
    expect((await request(a.url).delete("/drives/mount/").expect(400)).body.error).toMatch(/^mountPath: is required/);
    expect((await request(a.url).delete("/drives/mount").expect(400)).body.error).toMatch(/^mountPath: is required/);
    expect((await unmount(a, "mnt%2F..%2F..%2Fx").expect(400)).body.error).toMatch(/^mountPath: /);
  });

  it("refuses to unmount a busy mount with 409 naming the reason; force=true detaches it lazily", async () => {
    const a = await agent();
    await mount(a, { driveName: "d", mountPath: "/mnt/busy" }).expect(200);
    const fd = openSync(join(host(a, "/mnt/busy"), "open.txt"), "w");
    try {
      const busy = await unmount(a, "mnt/busy").expect(409);
      expect(busy.body.error).toMatch(/^mountPath: \/mnt\/busy is busy .*\?force=true/);
      expect(busy.body.error).not.toContain(a.root);
      expect(mountsAt(host(a, "/mnt/busy"))).toHaveLength(1);
      expect(await list(a)).toHaveLength(1);
      await request(a.url).delete("/drives/mount/mnt%2Fbusy?force=true").expect(200);
      expect(mountsAt(host(a, "/mnt/busy"))).toHaveLength(0);
      expect(await list(a)).toEqual([]);
    } finally {
      closeSync(fd);
    }
  });

  it("removes a mount point it created (and the parents it created) on unmount", async () => {
    const a = await agent();
    mkdirSync(host(a, "/home"));
    await mount(a, { driveName: "d", mountPath: "/home/u/deep/m" }).expect(200);
    await unmount(a, "home/u/deep/m").expect(200);
    expect(existsSync(host(a, "/home/u"))).toBe(false);
    expect(existsSync(host(a, "/home"))).toBe(true);
  });

  it("never takes over a pre-existing directory: shadowed while mounted, untouched after", async () => {
    const a = await agent();
    const dir = host(a, "/srv/existing");
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    writeFileSync(join(dir, "mine.txt"), "original");
    chownSync(dir, 1234, 1234);
    mkdirSync(join(drives(a), "d"), { recursive: true });
    writeFileSync(join(drives(a), "d", "drive.txt"), "drive");

    await mount(a, { driveName: "d", mountPath: "/srv/existing" }).expect(200);
    expect(existsSync(join(dir, "mine.txt"))).toBe(false);
    expect(readFileSync(join(dir, "drive.txt"), "utf8")).toBe("drive");
    await unmount(a, "srv/existing").expect(200);

    const stat = lstatSync(dir);
    expect([stat.isDirectory(), stat.uid, stat.gid, stat.mode & 0o777]).toEqual([true, 1234, 1234, 0o750]);
    expect(readFileSync(join(dir, "mine.txt"), "utf8")).toBe("original");
    expect(existsSync(join(dir, "drive.txt"))).toBe(false);
  });

  it("shares data between two agents mounting the same drive; read-only mounts refuse writes with EROFS", async () => {
    const shared = tempDir("drives-shared-");
    bases.push(shared);
    const a = await agent({ drivesDir: shared });
    const b = await agent({ drivesDir: shared });
    await mount(a, { driveName: "team", mountPath: "/mnt/team" }).expect(200);
    await mount(b, { driveName: "team", mountPath: "/data/team", readOnly: true }).expect(200);

    await request(a.url).put("/filesystem/mnt/team/note.txt").send({ content: "from agent a" }).expect(200);
    const read = await request(b.url).get("/filesystem/data/team/note.txt").expect(200);
    expect(read.body.content).toBe("from agent a");
    expect(readFileSync(join(shared, "team", "note.txt"), "utf8")).toBe("from agent a");

    expect(await list(b)).toEqual([{ driveName: "team", mountPath: "/data/team", drivePath: "/", readOnly: true, backend: "bind" }]);
    expect(() => writeFileSync(join(host(b, "/data/team"), "nope.txt"), "x")).toThrow(expect.objectContaining({ code: "EROFS" }));
    const refused = await request(b.url).put("/filesystem/data/team/nope.txt").send({ content: "x" });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatch(/EROFS/);
    expect(existsSync(join(shared, "team", "nope.txt"))).toBe(false);
  });

  it("never lists a mount that is gone, and forgets it", async () => {
    const a = await agent();
    await mount(a, { driveName: "d", mountPath: "/mnt/vanish" }).expect(200);
    expect(spawnSyncOk("umount", [host(a, "/mnt/vanish")])).toBe(0);
    expect(await list(a)).toEqual([]);
    await unmount(a, "mnt/vanish").expect(404);
    expect(existsSync(host(a, "/mnt/vanish"))).toBe(false);
    await mount(a, { driveName: "other", mountPath: "/mnt/vanish" }).expect(200);
  });

  it("leaves mounts in place on shutdown, and a new agent on the same data dir adopts them", async () => {
    const first = await startTestAgent({ driveBackend: "bind" });
    bases.push(dirname(first.root));
    await mount(first, { driveName: "keep", mountPath: "/mnt/keep", drivePath: "/sub" }).expect(200);
    // A process still using the drive keeps working across the restart.
    const user = spawn("sleep", ["30"], { cwd: host(first, "/mnt/keep"), stdio: "ignore" });
    try {
      await first.stop({ keepFiles: true });
      expect(mountsAt(join(first.root, "mnt/keep"))).toHaveLength(1);

      const second = await agent({ root: first.root, dataDir: first.dataDir });
      expect(await list(second)).toEqual([{ driveName: "keep", mountPath: "/mnt/keep", drivePath: "/sub", readOnly: false, backend: "bind" }]);
      await mount(second, { driveName: "keep", mountPath: "/mnt/keep", drivePath: "/sub" }).expect(200);
      await unmount(second, "mnt/keep").expect(409);
      user.kill("SIGKILL");
      await new Promise((resolve) => user.once("exit", resolve));
      await unmount(second, "mnt/keep").expect(200);
      expect(mountsAt(join(first.root, "mnt/keep"))).toHaveLength(0);
    } finally {
      user.kill("SIGKILL");
    }
  });
});

function spawnSyncOk(cmd: string, args: string[]): number | null {
  return spawnSync(cmd, args).status;
}
