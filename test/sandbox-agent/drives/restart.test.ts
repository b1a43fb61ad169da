import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MOUNT, SKIP_REASON, mountsAt, unmountUnder } from "./helpers.js";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * Mount through a real agent process, kill -9 it, start a new one on the
 * same data dir: the mount is still there, listed, and can be unmounted.
 * The agent is compiled into a private directory (under node_modules, so its
 * imports resolve) instead of the shared dist/.
 */
describe.skipIf(!MOUNT.ok)(`drives survive kill -9 of the agent${SKIP_REASON}`, () => {
  const out = join(REPO, "node_modules", ".cache", `drives-restart-${process.pid}`);
  // Made in beforeAll, not at collection time: a skipped suite (non-root) must leave no temp dir behind.
  let base = "";
  const children: ChildProcess[] = [];

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "drives-restart-"));
    const tsc = spawnSync(process.execPath, [join(REPO, "node_modules/typescript/bin/tsc"), "-p", join(REPO, "tsconfig.build.json"), "--outDir", out], {
      cwd: REPO,
      encoding: "utf8",
    });
    // tsc still emits when another in-progress folder has type errors; only a missing entry point is fatal.
    if (!existsSync(join(out, "sandbox-agent/main.js"))) throw new Error(`could not build the agent: ${tsc.stdout}${tsc.stderr}`);
  }, 120_000);

  afterAll(() => {
    for (const child of children) child.kill("SIGKILL");
    if (base) {
      unmountUnder(base);
      rmSync(base, { recursive: true, force: true });
    }
    rmSync(out, { recursive: true, force: true });
  });

  function startAgent(): Promise<{ url: string; child: ChildProcess }> {
    const child = spawn(
      process.execPath,
      [
        join(out, "sandbox-agent/main.js"),
        "--port",
        "0",
        "--root",
        join(base, "root"),
        "--data-dir",
        join(base, "data"),
        "--drive-backend",
        "bind",
        "--log-level",
        "silent",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    children.push(child);
    return new Promise((resolveUrl, reject) => {
      let output = "";
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = /listening on (http:\/\/\S+)/.exec(output);
        if (match) resolveUrl({ url: match[1]!, child });
      };
      child.stdout!.on("data", onData);
      child.stderr!.on("data", onData);
      child.once("exit", (code) => reject(new Error(`agent exited with ${code}: ${output}`)));
    });
  }

  it("keeps the mount across kill -9; the new agent lists it and unmounts it", async () => {
    const first = await startAgent();
    await request(first.url).post("/drives/mount").send({ driveName: "keep", mountPath: "/mnt/keep", drivePath: "/sub" }).expect(200);
    const mountPoint = join(base, "root", "mnt/keep");
    writeFileSync(join(mountPoint, "before.txt"), "written before the crash");

    const exited = new Promise((r) => first.child.once("exit", (_code, signal) => r(signal)));
    first.child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    expect(mountsAt(mountPoint)).toHaveLength(1);

    const second = await startAgent();
    const listed = await request(second.url).get("/drives/mount").expect(200);
    expect(listed.body.mounts).toEqual([{ driveName: "keep", mountPath: "/mnt/keep", drivePath: "/sub", readOnly: false, backend: "bind" }]);
    const read = await request(second.url).get("/filesystem/mnt/keep/before.txt").expect(200);
    expect(read.body.content).toBe("written before the crash");

    await request(second.url).delete("/drives/mount/mnt%2Fkeep").expect(200);
    expect(mountsAt(mountPoint)).toHaveLength(0);
    expect(existsSync(mountPoint)).toBe(false);
    expect(readFileSync(join(base, "data", "drives", "keep", "sub", "before.txt"), "utf8")).toBe("written before the crash");
    expect((await request(second.url).get("/drives/mount").expect(200)).body.mounts).toEqual([]);
  });
});
