import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, parseAgentConfig } from "../../../sandbox-agent/config.js";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { MOUNT, SKIP_REASON, mountsAt, unmountUnder } from "./helpers.js";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "fake-remote-fs.sh");
const ARGS = ["{driveName}", "{drivePath}", "{mountPath}", "{readOnly}"];

/** The `command` backend driven by fake-remote-fs.sh; the store is its "remote". */
describe("drives, command backend", () => {
  const started: TestAgent[] = [];
  const dirs: string[] = [];

  async function agent(): Promise<{ a: TestAgent; store: string }> {
    const store = tempDir("drives-remote-");
    dirs.push(store);
    const a = await startTestAgent({
      driveBackend: "command",
      driveMountCommand: JSON.stringify(["sh", SCRIPT, "mount", store, ...ARGS]),
      driveUnmountCommand: JSON.stringify(["sh", SCRIPT, "unmount", store, ...ARGS]),
      driveMountTimeoutMs: "1s",
    });
    started.push(a);
    dirs.push(dirname(a.root));
    return { a, store };
  }
  const host = (a: TestAgent, p: string) => join(a.root, p);
  const mount = (a: TestAgent, body: Record<string, unknown>) => request(a.url).post("/drives/mount").send(body);
  const list = async (a: TestAgent) => (await request(a.url).get("/drives/mount").expect(200)).body.mounts;

  afterEach(async () => {
    const mine = dirs.splice(0);
    for (const dir of mine) unmountUnder(dir);
    for (const a of started.splice(0)) await a.stop();
    for (const dir of mine) rmSync(dir, { recursive: true, force: true });
  });

  it("a failing mount command is a 500 carrying its output; the mount point it created is removed", async () => {
    const { a } = await agent();
    const res = await mount(a, { driveName: "fail-1", mountPath: "/mnt/f" }).expect(500);
    expect(res.body.error).toMatch(/^Failed to mount drive: mount command exited with status 3: remote refused drive fail-1: permission denied/);
    expect(existsSync(host(a, "/mnt"))).toBe(false);
    expect(await list(a)).toEqual([]);
  });

  it("a mount that never becomes ready times out: the program is killed, the mount point removed", async () => {
    const { a, store } = await agent();
    mkdirSync(host(a, "/srv/pre"), { recursive: true });
    const res = await mount(a, { driveName: "hang-1", mountPath: "/srv/pre/m" }).expect(500);
    expect(res.body.error).toMatch(/^Failed to mount drive: timeout waiting for the mount to be ready after 1s: connecting to remote/);
    const pid = Number(readFileSync(join(store, "hang-1.pid"), "utf8"));
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
    expect(existsSync(host(a, "/srv/pre/m"))).toBe(false);
    expect(existsSync(host(a, "/srv/pre"))).toBe(true);
  });

  it("a mount program that cannot start is a 500 naming it", async () => {
    const a = await startTestAgent({ driveBackend: "command", driveMountCommand: "/nonexistent/mounter {mountPath}" });
    started.push(a);
    const res = await mount(a, { driveName: "d", mountPath: "/mnt/x" }).expect(500);
    expect(res.body.error).toMatch(/could not start/);
    expect(existsSync(host(a, "/mnt/x"))).toBe(false);
  });

  describe.skipIf(!MOUNT.ok)(`with real mounts${SKIP_REASON}`, () => {
    it("mounts through a foreground program, then unmounts through the unmount template", async () => {
      const { a, store } = await agent();
      const res = await mount(a, { driveName: "remote", mountPath: "/mnt/r", drivePath: "/team" }).expect(200);
      expect(res.body).toMatchObject({ success: true, backend: "command", mountPath: "/mnt/r", drivePath: "/team" });
      expect(mountsAt(host(a, "/mnt/r"))).toHaveLength(1);
      const pid = Number(readFileSync(join(store, "remote.pid"), "utf8"));
      expect(() => process.kill(pid, 0)).not.toThrow();
      writeFileSync(join(host(a, "/mnt/r"), "x.txt"), "remote data");
      expect(readFileSync(join(store, "remote", "team", "x.txt"), "utf8")).toBe("remote data");
      expect(await list(a)).toEqual([{ driveName: "remote", mountPath: "/mnt/r", drivePath: "/team", readOnly: false, backend: "command" }]);

      await request(a.url).delete("/drives/mount/mnt%2Fr").expect(200);
      expect(mountsAt(host(a, "/mnt/r"))).toHaveLength(0);
      expect(existsSync(host(a, "/mnt/r"))).toBe(false);
      // The foreground program noticed the unmount and exited (the agent reaps it).
      expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
    });

    it("accepts a daemonizing program, read-only mounts refuse writes", async () => {
      const { a } = await agent();
      await mount(a, { driveName: "daemon-ro", mountPath: "/mnt/ro", readOnly: true }).expect(200);
      expect(await list(a)).toEqual([{ driveName: "daemon-ro", mountPath: "/mnt/ro", drivePath: "/", readOnly: true, backend: "command" }]);
      expect(() => writeFileSync(join(host(a, "/mnt/ro"), "nope"), "x")).toThrow(expect.objectContaining({ code: "EROFS" }));
    });

    it("passes values as literal arguments, never through a shell", async () => {
      const { a, store } = await agent();
      const drivePath = "/a b;touch pwned;$(touch pwned2)";
      await mount(a, { driveName: "daemon-lit", mountPath: "/mnt/with space", drivePath }).expect(200);
      expect(existsSync(join(store, "daemon-lit", drivePath))).toBe(true);
      expect(readdirSync(store).filter((f) => f.startsWith("pwned"))).toEqual([]);
      expect(readdirSync(process.cwd()).filter((f) => f.startsWith("pwned"))).toEqual([]);
      expect(mountsAt(host(a, "/mnt/with space"))).toHaveLength(1);
      expect((await list(a))[0]).toMatchObject({ mountPath: "/mnt/with space", drivePath });
      await request(a.url)
        .delete(`/drives/mount/${encodeURIComponent("mnt/with space")}`)
        .expect(200);
    });
  });
});

describe("drive options", () => {
  it("the command backend needs a mount command; templates are checked at start-up", () => {
    expect(() => parseAgentConfig(["--drive-backend", "command"], {})).toThrow(ConfigError);
    expect(() => parseAgentConfig(["--drive-backend", "command", "--drive-mount-command", "mount {bogus}"], {})).toThrow(
      /--drive-mount-command: unknown placeholder/,
    );
    expect(() => parseAgentConfig(["--drive-backend", "nfs"], {})).toThrow(/--drive-backend/);
    expect(() => parseAgentConfig(["--drive-mount-timeout", "soon"], {})).toThrow(/--drive-mount-timeout/);
    const config = parseAgentConfig(
      ["--drive-backend", "command", "--drive-mount-command", '["rclone","mount","r:{driveName}{drivePath}","{mountPath}"]', "--drive-mount-timeout", "5s"],
      {},
    );
    expect(config).toMatchObject({
      driveBackend: "command",
      driveMountCommand: ["rclone", "mount", "r:{driveName}{drivePath}", "{mountPath}"],
      driveMountTimeoutMs: 5000,
    });
  });
});
