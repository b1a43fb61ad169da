import { afterAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { loopDevicesOf, loopVolumesUnsupported, volumeImagePath } from "../../../simulator/agents/volume-fs.js";
import { isAlive } from "../launcher/helpers.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * The SDK's volume resize test (sdk-typescript tests/integration/sandbox/
 * volumes.test.ts, "resizes volume and preserves data") through the unmodified
 * @blaxel/core against the simulator with isolated sandboxes (bwrap): a
 * 512 MB volume filled to 400 MB, grown to 1024 MB, keeps its data and the
 * next sandbox sees the bigger filesystem; grown again while a sandbox runs
 * with it; never shrunk. Needs loop-mounted volumes (root, e2fsprogs, a free
 * loop device). Its own file: @blaxel/core keeps the first simulator it was
 * pointed at for the whole file.
 */
const noLoop = loopVolumesUnsupported();

describe.skipIf(noLoop !== undefined)(`a volume grown through @blaxel/core, as the SDK's volume test does${noLoop ? ` (skipped: ${noLoop})` : ""}`, () => {
  let sim: ServedSimulator | undefined;
  const pids: number[] = [];
  afterAll(async () => {
    await sim?.stop();
    // Nothing the sandboxes ran outlives the simulator.
    expect(pids.filter((pid) => isAlive(pid))).toEqual([]);
  });

  /** `df` of /data in the sandbox: [use%, size in 1K blocks]. */
  async function df(sandbox: { process: { exec(o: { command: string; waitForCompletion: boolean }): Promise<{ logs?: string }> } }): Promise<[number, number]> {
    const run = await sandbox.process.exec({ command: "df -P /data | tail -1 | awk '{print $5, $2}' | sed 's/%//'", waitForCompletion: true });
    const [use, size] = (run.logs ?? "").trim().split(/\s+/).map(Number);
    return [use!, size!];
  }

  it("512 → 1024 MB keeps the data; the next sandbox sees the bigger filesystem and can write what did not fit before", async () => {
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: "vol-grow-key", workspace: "volgrow", logLevel: "silent" });
    const sdk = await sdkForSimulator(sim.env);
    await sdk.VolumeInstance.create({ name: "resize-vol", size: 512 });
    const first = await sdk.SandboxInstance.create({ name: "resize-1", volumes: [{ name: "resize-vol", mountPath: "/data", readOnly: false }] });
    pids.push(sim.agents.get("volgrow", "resize-1")!.pid!);
    // fallocate takes the blocks without writing them: the same ENOSPC as dd, without 400 MB of I/O.
    expect((await first.process.exec({ command: "fallocate -l 400M /data/large-file-1.bin && echo WRITTEN", waitForCompletion: true })).logs).toContain(
      "WRITTEN",
    );
    const [usedBefore, sizeBefore] = await df(first);
    expect(usedBefore).toBeGreaterThan(60);
    expect((await first.process.exec({ command: "fallocate -l 400M /data/too-big.bin 2>&1 || echo WRITE_FAILED", waitForCompletion: true })).logs).toMatch(
      /No space left on device[\s\S]*WRITE_FAILED/,
    );
    await first.process.exec({ command: "rm -f /data/too-big.bin", waitForCompletion: true });
    await sdk.SandboxInstance.delete("resize-1");
    await expect(sdk.SandboxInstance.get("resize-1")).rejects.toMatchObject({ code: 404 });

    const grown = await sdk.VolumeInstance.update("resize-vol", { size: 1024 });
    expect(grown.size).toBe(1024);
    const second = await sdk.SandboxInstance.create({ name: "resize-2", volumes: [{ name: "resize-vol", mountPath: "/data", readOnly: false }] });
    expect((await second.process.exec({ command: "ls -l /data/large-file-1.bin", waitForCompletion: true })).logs).toContain("large-file-1.bin");
    const [usedAfter, sizeAfter] = await df(second);
    expect(sizeAfter).toBeGreaterThan(sizeBefore * 1.9);
    expect(usedAfter).toBeLessThan(usedBefore);
    expect((await second.process.exec({ command: "fallocate -l 400M /data/large-file-2.bin && echo WRITE_SUCCESS", waitForCompletion: true })).logs).toContain(
      "WRITE_SUCCESS",
    );
    const listing = (await second.process.exec({ command: "ls /data", waitForCompletion: true })).logs ?? "";
    expect(listing).toContain("large-file-1.bin");
    expect(listing).toContain("large-file-2.bin");

    // Attached to a running sandbox: accepted (200) as on the platform. Where the kernel resizes online the sandbox sees
    // the new size at once; where it refuses (no CAP_SYS_RESOURCE), the growth waits until no sandbox mounts the volume.
    const pid = sim.agents.get("volgrow", "resize-2")!.pid;
    pids.push(pid!);
    const [, sizeAttached] = await df(second);
    expect((await sdk.VolumeInstance.update("resize-vol", { size: 1536 })).size).toBe(1536);
    const [, sizeLive] = await df(second);
    const { data: volume } = await sdk.getVolume({ path: { volumeName: "resize-vol" }, throwOnError: true });
    const events = (volume.events ?? []).map((e) => e.message ?? "");
    if (sizeLive === sizeAttached) expect(events.at(-1)).toMatch(/^spec.size 1536 MB: the filesystem grows once no sandbox mounts the volume/);
    else expect(sizeLive).toBeGreaterThan(sizeAttached * 1.4);
    expect(sim.agents.get("volgrow", "resize-2")!.pid).toBe(pid);
    // One filesystem throughout: no second loop device on the image.
    const image = volumeImagePath(sim.agents.dir, "volgrow", "resize-vol");
    expect(loopDevicesOf(image)).toHaveLength(1);
    // Volumes only grow: a smaller size is refused and changes nothing.
    await expect(sdk.VolumeInstance.update("resize-vol", { size: 512 })).rejects.toMatchObject({
      code: 400,
      message: expect.stringContaining("cannot shrink"),
    });
    expect((await sdk.VolumeInstance.get("resize-vol")).size).toBe(1536);
    await sdk.SandboxInstance.delete("resize-2");
    // The next sandbox to mount it, created as soon as the delete answered, has the whole 1536 MB and every file.
    const third = await sdk.SandboxInstance.create({ name: "resize-3", volumes: [{ name: "resize-vol", mountPath: "/data", readOnly: false }] });
    pids.push(sim.agents.get("volgrow", "resize-3")!.pid!);
    const [, sizeThird] = await df(third);
    expect(sizeThird).toBeGreaterThan(sizeAttached * 1.4);
    expect((await third.process.exec({ command: "fallocate -l 400M /data/large-file-3.bin && ls /data", waitForCompletion: true })).logs).toMatch(
      /large-file-1.bin\s+large-file-2.bin\s+large-file-3.bin/,
    );
    expect(loopDevicesOf(image)).toHaveLength(1);
    await sdk.SandboxInstance.delete("resize-3");
  }, 120_000);
});
