import { createHash, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimulator, type StartedSimulator } from "../../index.js";
import { ImageStore } from "../../simulator/images/image-store.js";
import { ensureDockerDaemon, ensureLocalBaseImage, tinyImage } from "../helpers/docker.js";
import { sdkForSimulator } from "../helpers/sdk.js";

/**
 * `--launcher docker` end to end against a real daemon: the simulator runs each sandbox's agent in a
 * container of spec.runtime.image, and @blaxel/core creates a sandbox, moves files both ways (multipart
 * above 5 MiB), writes a program and runs it (the file API and commands see one `/`), keeps the sandbox's
 * files across a restart (docker commit), gives Docker an image only the simulator's store has (removed from
 * the daemon first), and deletes it all — leaving no container behind.
 */
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const unavailable = await ensureDockerDaemon();
if (unavailable) console.warn(`simulator --launcher docker tests skipped: ${unavailable}`);
const docker = (...args: string[]) => execFileSync("docker", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

describe.skipIf(unavailable !== undefined)(`sandbox-sim --launcher docker with a real daemon${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let sim: StartedSimulator;
  let image = "";
  const cache = mkdtempSync(join(tmpdir(), "sim-docker-images-"));
  const stored = `sandbox-kit-test/stored-only:${process.pid}`;
  beforeAll(async () => {
    image = await ensureLocalBaseImage();
    // An image only the simulator's store has: saved from Docker into the store, then removed from the daemon.
    const tiny = tinyImage();
    docker("tag", tiny, stored);
    const tar = join(cache, "stored.tar");
    execFileSync("sh", ["-c", `docker save "$1" > "$2"`, "sh", stored, tar]);
    docker("rmi", stored);
    const store = new ImageStore({ dir: cache, docker: null });
    await store.import(tar, stored);
    await store.close();
    sim = await startSimulator({ launcher: "docker", logLevel: "silent", imageCache: cache });
  }, 1_200_000);
  afterAll(async () => {
    await sim?.stop();
    try {
      docker("rmi", stored);
    } catch {
      // Not imported (a failed test).
    }
    rmSync(cache, { recursive: true, force: true });
  });

  const events = async (name: string) => {
    const res = await fetch(`${sim.url}/v0/sandboxes/${name}`, {
      headers: { "x-blaxel-authorization": `Bearer ${sim.env.BL_API_KEY}`, "x-blaxel-workspace": sim.env.BL_WORKSPACE ?? "" },
    });
    return ((await res.json()) as { events?: { message: string }[] }).events?.map((e) => e.message) ?? [];
  };

  it("creates a sandbox of the image, files and a process through the SDK, then deletes it", async () => {
    const { SandboxInstance } = await sdkForSimulator(sim.env);
    const name = `docker-e2e-${process.pid}`;
    const sandbox = await SandboxInstance.create({ name, image, memory: 2048 });
    try {
      expect(sandbox.metadata?.name).toBe(name);
      await sandbox.fs.write("/notes/hello.txt", "written through the simulator");
      expect(await sandbox.fs.read("/notes/hello.txt")).toBe("written through the simulator");
      const data = randomBytes(7 * 1024 * 1024);
      await sandbox.fs.writeBinary("/notes/big.bin", data);
      const back = await sandbox.fs.readBinary("/notes/big.bin");
      expect(sha(new Uint8Array(await back.arrayBuffer()))).toBe(sha(data));
      const ran = await sandbox.process.exec({ command: "grep -h '^ID=' /etc/os-release; cat /notes/hello.txt", waitForCompletion: true });
      expect(ran.exitCode).toBe(0);
      expect(ran.logs).toContain("ID=debian");
      expect(ran.logs).toContain("written through the simulator");
      // The file API and the commands share one `/`: a program written, then run.
      await sandbox.fs.write("/tmp/sw.txt", "one root");
      await sandbox.fs.write("/tmp/run.sh", "#!/bin/sh\necho ran: $(cat /tmp/sw.txt)\n");
      const script = await sandbox.process.exec({ command: "chmod +x /tmp/run.sh && /tmp/run.sh", waitForCompletion: true });
      expect(script.logs).toContain("ran: one root");
      // The image's own files are seen by the file API as by commands.
      expect(await sandbox.fs.read("/etc/debian_version")).toMatch(/^\d+/);
    } finally {
      await SandboxInstance.delete(name);
    }
  }, 300_000);

  it("gives Docker an image only the simulator's store has (progress in the events), and keeps files across a restart", async () => {
    const { SandboxInstance } = await sdkForSimulator(sim.env);
    expect(() => docker("image", "inspect", stored)).toThrow(); // a fresh daemon state for this image
    const name = `docker-stored-${process.pid}`;
    const sandbox = await SandboxInstance.create({ name, image: stored, memory: 1024 });
    try {
      expect(docker("image", "inspect", "--format", "{{.Id}}", stored)).toMatch(/^sha256:/);
      expect((await events(name)).join("\n")).toContain(`importing ${stored} into the Docker engine of this host`);
      await sandbox.fs.write("/hello.sh", "#!/bin/sh\necho hello from the stored image\n");
      const ran = await sandbox.process.exec({ command: "/bin/sh /hello.sh", waitForCompletion: true });
      expect(ran.logs).toContain("hello from the stored image");
      // Archive stops its container, unarchive starts a new one: its files are still there (docker commit).
      await SandboxInstance.archive(name);
      await SandboxInstance.unarchive(name);
      const back = await SandboxInstance.get(name);
      expect((await back.process.exec({ command: "/bin/sh /hello.sh", waitForCompletion: true })).logs).toContain("hello from the stored image");
    } finally {
      await SandboxInstance.delete(name);
    }
    expect(docker("ps", "--all", "--quiet", "--filter", "label=sandbox-kit.sandbox")).not.toContain(name);
  }, 300_000);
});
