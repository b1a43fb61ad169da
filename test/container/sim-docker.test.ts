import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimulator, type StartedSimulator } from "../../index.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../helpers/docker.js";
import { sdkForSimulator } from "../helpers/sdk.js";

/**
 * `--launcher docker` end to end against a real daemon: the simulator runs each sandbox's agent in a
 * container of spec.runtime.image, and @blaxel/core creates a sandbox, moves files both ways (multipart
 * above 5 MiB), runs a process in the image, and deletes it — leaving no container behind.
 */
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const unavailable = await ensureDockerDaemon();
if (unavailable) console.warn(`simulator --launcher docker tests skipped: ${unavailable}`);

describe.skipIf(unavailable !== undefined)(`sandbox-sim --launcher docker with a real daemon${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let sim: StartedSimulator;
  let image = "";
  beforeAll(async () => {
    image = await ensureLocalBaseImage();
    sim = await startSimulator({ launcher: "docker", logLevel: "silent" });
  }, 1_200_000);
  afterAll(async () => {
    await sim?.stop();
  });

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
      const ran = await sandbox.process.exec({ command: "grep -h '^ID=' /etc/os-release; cat notes/hello.txt", waitForCompletion: true });
      expect(ran.exitCode).toBe(0);
      expect(ran.logs).toContain("ID=debian");
      expect(ran.logs).toContain("written through the simulator");
    } finally {
      await SandboxInstance.delete(name);
    }
  }, 300_000);
});
