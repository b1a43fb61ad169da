import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";

import { mountsUnder } from "../../../src/mounts.js";
import { loopVolumesUnsupported, volumeImagePath } from "../../../simulator/agents/volume-fs.js";
import { attachmentProblem, volumeDir, volumeMounts } from "../../../simulator/agents/volumes.js";
import { dockerRunArgs } from "../../../simulator/launcher/docker-args.js";
import { DockerLauncher, LaunchError, ProcessLauncher } from "../../../simulator/launcher/index.js";
import { launchOptions } from "../../../simulator/sandboxes/agent-lifecycle.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { startTestSim } from "../../helpers/simulator.js";
import { eventually, specFor, tempBase } from "../launcher/helpers.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../../helpers/docker.js";

/**
 * Volumes with real sandboxes: spec.volumes → LaunchSpec.mounts (unit), the
 * docker launcher's --mount flags, the process launcher's refusal, and a file
 * shared by two sandboxes through a volume with a real Docker daemon.
 */
describe("spec.volumes → LaunchSpec.mounts", () => {
  it("mounts each volume's directory at its mountPath, read-only when asked", () => {
    const options = launchOptions({
      spec: {
        runtime: { envs: [] },
        volumes: [
          { name: "data", mountPath: "/data/" },
          { name: "cache", mountPath: "/var/cache/app", readOnly: true },
        ],
      },
    });
    expect(volumeMounts("/sim", "ws", options.volumes)).toEqual([
      { source: "/sim/volumes/ws/data", target: "/data", readOnly: false },
      { source: "/sim/volumes/ws/cache", target: "/var/cache/app", readOnly: true },
    ]);
    expect(volumeDir("/sim", "ws", "data")).toBe("/sim/volumes/ws/data");
    expect(volumeMounts("/sim", "ws", launchOptions({ spec: {} }).volumes)).toEqual([]);
  });

  it("refuses attachments that cannot be mounted", () => {
    expect(attachmentProblem({ mountPath: "/d" }, 0)).toMatch(/name: required/);
    expect(attachmentProblem({ name: "../etc", mountPath: "/d" }, 1)).toMatch(/spec.volumes\[1\].name/);
    expect(attachmentProblem({ name: "v", mountPath: "data" }, 0)).toMatch(/absolute/);
    expect(attachmentProblem({ name: "v", mountPath: "/" }, 0)).toMatch(/cannot be mounted over/);
    expect(attachmentProblem({ name: "v", mountPath: "/a/../b" }, 0)).toMatch(/cannot be mounted over/);
    expect(() => volumeMounts("/sim", "ws", [{ name: "v" }])).toThrow(/mountPath/);
  });

  it("docker binds each mount at its path in the one root the agent and commands share, readonly when asked", () => {
    const spec = specFor("/data", "one", {
      mounts: [
        { source: "/sim/volumes/ws/data", target: "/data", readOnly: false },
        { source: "/sim/volumes/ws/ro", target: "/ro", readOnly: true },
      ],
    });
    const argv = dockerRunArgs(spec, { name: "c", agentMain: "/srv/kit/dist/sandbox-agent/main.js", node: "/usr/bin/node", user: "0:0" });
    const mounts = argv.flatMap((a, i) => (argv[i - 1] === "--mount" ? [a] : []));
    expect(mounts).toContain("type=bind,source=/sim/volumes/ws/data,target=/data");
    expect(mounts).toContain("type=bind,source=/sim/volumes/ws/ro,target=/ro,readonly");
    // The agent serves the container's own / (--root /): no second copy under /sandbox.
    expect(mounts.filter((m) => m.includes("target=/sandbox"))).toEqual([]);
  });

  it("the process launcher refuses a start with mounts, naming the isolating launchers", async () => {
    const error = await new ProcessLauncher()
      .start(specFor(tempBase("vol-proc-"), "v", { mounts: [{ source: "/tmp/x", target: "/data", readOnly: false }] }))
      .catch((e: Error) => e);
    expect(error).toBeInstanceOf(LaunchError);
    expect((error as Error).message).toMatch(/cannot mount volumes .*\/data.*bwrap or docker/);
  });
});

describe("volume statuses", () => {
  const records = startTestSim();
  afterAll(() => records.close());

  it("a new volume is DEPLOYING, then DEPLOYED on the clock, one event per move", async () => {
    const created = await records.api.post("/v0/volumes", { metadata: { name: "fresh" }, spec: { size: 128 } }).expect(200);
    expect(created.body.status).toBe("DEPLOYING");
    records.clock.advance(1_000);
    const later = await records.api.get("/v0/volumes/fresh").expect(200);
    expect(later.body.status).toBe("DEPLOYED");
    expect(later.body.events.map((e: { status: string }) => e.status)).toEqual(["DEPLOYING", "DEPLOYED"]);
  });
});

describe("volumes through HTTP with the process launcher", () => {
  let sim: ServedSimulator;
  afterAll(async () => {
    await sim?.stop();
  });

  it("a volume is a directory created and removed with it; a sandbox naming a missing volume or a bad path is a 400; the process launcher fails the sandbox clearly", async () => {
    sim = await serveSimulator({ port: 0, apiKey: "vol-proc-key", workspace: "volproc", logLevel: "silent" }, { launcher: new ProcessLauncher() });
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${sim.url}/v0${path}`, {
        method,
        headers: { authorization: "Bearer vol-proc-key", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect((await api("POST", "/volumes", { metadata: { name: "shared" }, spec: { size: 64 } })).status).toBe(200);
    const dir = volumeDir(sim.agents.dir, "volproc", "shared");
    expect(existsSync(dir)).toBe(true);
    expect(mountsUnder(dir).includes(dir)).toBe(!noLoop);
    const missing = await api("POST", "/sandboxes", { metadata: { name: "nope" }, spec: { volumes: [{ name: "absent", mountPath: "/data" }] } });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { message: string }).message).toMatch(/volume "absent" not found/);
    expect((await api("POST", "/sandboxes", { metadata: { name: "nope" }, spec: { volumes: [{ name: "shared", mountPath: "data" }] } })).status).toBe(400);
    const refused = await api("POST", "/sandboxes", { metadata: { name: "procvol" }, spec: { volumes: [{ name: "shared", mountPath: "/data" }] } });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { message: string }).message).toMatch(/cannot mount volumes/);
    // Still named by the (FAILED) sandbox: 409, as the platform answers for an attached volume.
    expect((await api("DELETE", "/volumes/shared")).status).toBe(409);
    expect((await api("DELETE", "/sandboxes/procvol")).status).toBe(200);
    expect((await api("DELETE", "/volumes/shared")).status).toBe(200);
    expect(existsSync(dir)).toBe(false);
    expect(mountsUnder(dir)).toEqual([]);
    expect(existsSync(volumeImagePath(sim.agents.dir, "volproc", "shared"))).toBe(false);
  }, 60_000);
});

const noLoop = loopVolumesUnsupported();
if (noLoop) console.warn(`volume filesystems of their size not tested: ${noLoop}`);

describe.skipIf(noLoop !== undefined)(`a volume is a filesystem of its spec.size${noLoop ? ` (skipped: ${noLoop})` : ""}`, () => {
  it("writing past the size fails with ENOSPC, and fits once the volume grew; unmounted on stop, mounted again with its files by a --data restart", async () => {
    const data = join(tempBase("vol-data-"), "sim.db");
    const config = { port: 0, apiKey: "vol-loop-key", workspace: "volloop", logLevel: "silent" as const, data };
    let served = await serveSimulator(config, { launcher: new ProcessLauncher() });
    try {
      const res = await fetch(`${served.url}/v0/volumes`, {
        method: "POST",
        headers: { authorization: "Bearer vol-loop-key", "content-type": "application/json" },
        body: JSON.stringify({ metadata: { name: "small" }, spec: { size: 16 } }),
      });
      expect(res.status).toBe(200);
      const dir = volumeDir(served.agents.dir, "volloop", "small");
      writeFileSync(join(dir, "kept.txt"), "kept");
      expect(() => writeFileSync(join(dir, "big.bin"), Buffer.alloc(32 * 1024 * 1024))).toThrow(/ENOSPC/);
      rmSync(join(dir, "big.bin"), { force: true });
      // Grown to 64 MB (volumes only grow): resized online, the same write now fits.
      const grown = await fetch(`${served.url}/v0/volumes/small`, {
        method: "PUT",
        headers: { authorization: "Bearer vol-loop-key", "content-type": "application/json" },
        body: JSON.stringify({ metadata: { name: "small" }, spec: { size: 64 } }),
      });
      expect(grown.status).toBe(200);
      writeFileSync(join(dir, "big.bin"), Buffer.alloc(32 * 1024 * 1024));
      rmSync(join(dir, "big.bin"));
      await served.stop();
      expect(mountsUnder(dir)).toEqual([]);
      expect(existsSync(join(dir, "kept.txt"))).toBe(false); // the files are in the image, not the directory
      served = await serveSimulator(config, { launcher: new ProcessLauncher() });
      expect(mountsUnder(dir).includes(dir)).toBe(true);
      expect(readFileSync(join(dir, "kept.txt"), "utf8")).toBe("kept");
    } finally {
      await served.stop();
    }
  }, 60_000);
});

describe.skipIf(noLoop !== undefined)(`a volume's filesystem is made without holding up the simulator${noLoop ? ` (skipped: ${noLoop})` : ""}`, () => {
  it("while a create's mkfs.ext4 runs, other requests are answered; a second create of the same name waits for it, then answers 409", async () => {
    // mkfs.ext4 held until the test lets it go (10 s at most): a stand-in first on PATH that marks its start, waits, then runs the real one.
    const marks = tempBase("vol-mkfs-");
    const real = execFileSync("sh", ["-c", "command -v mkfs.ext4"], { encoding: "utf8" }).trim();
    writeFileSync(
      join(marks, "mkfs.ext4"),
      `#!/bin/sh\ntouch "${marks}/started"\ni=0; while [ ! -e "${marks}/go" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done\nexec "${real}" "$@"\n`,
      {
        mode: 0o755,
      },
    );
    const path = process.env.PATH;
    process.env.PATH = `${marks}:${path}`;
    const served = await serveSimulator({ port: 0, apiKey: "vol-async-key", workspace: "volasync", logLevel: "silent" }, { launcher: new ProcessLauncher() });
    try {
      const api = (method: string, route: string, body?: unknown) =>
        fetch(`${served.url}${route}`, {
          method,
          headers: { authorization: "Bearer vol-async-key", "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      const create = api("POST", "/v0/volumes", { metadata: { name: "held" }, spec: { size: 16 } });
      await eventually(() => existsSync(join(marks, "started")));
      const again = api("POST", "/v0/volumes", { metadata: { name: "held" }, spec: { size: 16 } });
      let created = false;
      void create.then(() => (created = true));
      // The event loop is free while mkfs.ext4 runs: these are answered before the create (before, execFileSync
      // held every request until mkfs.ext4 ended, which the stand-in does by itself after 10 s).
      expect((await api("GET", "/health")).status).toBe(200);
      expect((await api("GET", "/v0/volumes")).status).toBe(200);
      expect(created).toBe(false);
      writeFileSync(join(marks, "go"), "");
      expect((await create).status).toBe(200);
      expect((await again).status).toBe(409);
      const dir = volumeDir(served.agents.dir, "volasync", "held");
      expect(mountsUnder(dir).includes(dir)).toBe(true);
    } finally {
      process.env.PATH = path;
      writeFileSync(join(marks, "go"), "");
      await served.stop();
    }
  }, 30_000);
});

// A daemon started here if need be, and an image built locally: no registry is reachable, so a registry image
// such as debian:bookworm-slim is on no fresh machine.
const unavailable = await ensureDockerDaemon();
let image = process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? "";

describe.skipIf(unavailable !== undefined)(`volumes shared between sandboxes (docker launcher)${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let sim: ServedSimulator;
  beforeAll(async () => {
    image ||= await ensureLocalBaseImage();
  }, 1_200_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it("a file written by sandbox A is read by sandbox B and survives both", async () => {
    sim = await serveSimulator(
      { port: 0, apiKey: "vol-docker-key", workspace: "voldocker", logLevel: "silent" },
      { launcher: new DockerLauncher({ image, readyTimeoutMs: 180_000 }) },
    );
    const sdk = await sdkForSimulator(sim.env);
    await sdk.VolumeInstance.create({ name: "shared", size: 64 });
    const a = await sdk.SandboxInstance.create({ name: "writer", image, volumes: [{ name: "shared", mountPath: "/data", readOnly: false }] } as never);
    const wrote = await a.process.exec({ command: "echo from-a > /data/note.txt && cat /data/note.txt", waitForCompletion: true });
    expect(wrote.exitCode).toBe(0);
    const b = await sdk.SandboxInstance.create({ name: "reader", image, volumes: [{ name: "shared", mountPath: "/mnt/vol", readOnly: true }] } as never);
    expect((await b.process.exec({ command: "cat /mnt/vol/note.txt", waitForCompletion: true })).stdout?.trim()).toBe("from-a");
    // The filesystem API sees the volume at the same path.
    expect(await b.fs.read("/mnt/vol/note.txt")).toBe("from-a\n");
    // Read-only for B.
    const denied = await b.process.exec({ command: "echo x > /mnt/vol/other.txt", waitForCompletion: true });
    expect(denied.exitCode).not.toBe(0);
    if (!noLoop) {
      // 64 MB, as on the platform: writing past it is ENOSPC inside the sandbox.
      const full = await a.process.exec({ command: "dd if=/dev/zero of=/data/big bs=1M count=100 2>&1; echo exit=$?", waitForCompletion: true });
      expect(full.stdout).toMatch(/No space left on device/);
      await a.process.exec({ command: "rm /data/big", waitForCompletion: true });
    }
    await sdk.SandboxInstance.delete("writer");
    await sdk.SandboxInstance.delete("reader");
    expect(readFileSync(join(volumeDir(sim.agents.dir, "voldocker", "shared"), "note.txt"), "utf8")).toBe("from-a\n");
    // A new sandbox after both are gone still reads it.
    const c = await sdk.SandboxInstance.create({ name: "later", image, volumes: [{ name: "shared", mountPath: "/data" }] } as never);
    expect((await c.process.exec({ command: "cat /data/note.txt", waitForCompletion: true })).stdout?.trim()).toBe("from-a");
    await sdk.SandboxInstance.delete("later");
  }, 300_000);
});
