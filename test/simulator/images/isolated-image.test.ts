import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { parseLdd } from "../../../simulator/launcher/sandbox-kit.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { writeOciLayout, type TestEntry } from "./tar-writer.js";

/**
 * #12 "Images are real root filesystems", end to end with the default
 * (isolating) launcher: a sandbox made from an image runs over that image's
 * root filesystem — its commands and the filesystem API see the image's
 * files — and writes into its own copy-on-write layer: invisible to a second
 * sandbox of the same image, the stored image never changed. The image is a
 * tiny one made here (a shell, cat and their libraries), imported as an OCI
 * layout, so the test needs no network and no hub build.
 */
type Sdk = typeof import("@blaxel/core");
const WS = "iso-images";
const KEY = "iso-images-admin-key";
let sim: ServedSimulator;
let sdk: Sdk;
let store: ImageStore;

/** The host's files an image needs to run `sh` and `cat` (the agent itself comes from the sandbox kit, not the image). */
function tinyImageFiles(): TestEntry[] {
  const binaries = ["/bin/sh", "/bin/cat", "/bin/ls"].map((b) => realpathSync(b));
  const files = new Map<string, string>(); // path in the image -> host file
  for (const bin of binaries) {
    files.set(bin, bin);
    const { libs, loader } = parseLdd(execFileSync("ldd", [bin], { encoding: "utf8" }));
    for (const path of [...libs.values(), ...(loader ? [loader] : [])]) files.set(path, realpathSync(path));
  }
  const entries: TestEntry[] = [...files].map(([inImage, host]) => ({ name: inImage.slice(1), content: readFileSync(host), mode: 0o755 }));
  entries.push({ name: "bin/sh", type: "symlink", link: realpathSync("/bin/sh") });
  entries.push({ name: "etc/os-release", content: "ID=tiny-test-image\n" });
  entries.push({ name: "usr/local/bin", type: "dir" });
  return entries;
}

beforeAll(async () => {
  if (isolationUnavailable) return;
  const cache = trackedTempDir("iso-images-");
  store = new ImageStore({ dir: cache, docker: null });
  const layout = join(trackedTempDir("iso-layout-"), "oci");
  writeOciLayout(layout, [tinyImageFiles()], { config: { Env: ["PATH=/usr/local/bin:/usr/bin:/bin", "FROM_IMAGE=tiny"], WorkingDir: "/" } });
  await store.import(layout, "tiny-shell:v1");
  // The default launcher (bwrap) with the image store: what `npm start` runs.
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageCache: cache });
  sdk = await sdkForSimulator(sim.env);
}, 120_000);
afterAll(async () => {
  await sim?.stop();
});

describe.skipIf(isolationUnavailable !== undefined)("isolated sandboxes run over their image's root filesystem", () => {
  it("commands and the filesystem API see the image; each sandbox writes its own layer; the image never changes", async () => {
    const one = await sdk.SandboxInstance.create({ name: "tiny-one", image: "tiny-shell:v1" });
    const two = await sdk.SandboxInstance.create({ name: "tiny-two", image: "tiny-shell:v1" });
    const run = async (sandbox: typeof one, command: string) => (await sandbox.process.exec({ command, waitForCompletion: true })).logs ?? "";

    // The image's files, not the host's: no /usr/bin/node, no /etc/debian_version here.
    expect(await run(one, "cat /etc/os-release")).toBe("ID=tiny-test-image\n");
    expect(await run(one, "ls /usr/bin/node /etc/debian_version 2>/dev/null || echo absent")).toBe("absent\n");
    expect(await run(one, "echo $FROM_IMAGE")).toBe("tiny\n");

    await run(one, "echo tool > /usr/local/bin/tool; echo changed > /etc/os-release");
    expect(await run(one, "cat /usr/local/bin/tool /etc/os-release")).toBe("tool\nchanged\n");
    expect(await run(two, "cat /usr/local/bin/tool 2>/dev/null || echo none; cat /etc/os-release")).toBe("none\nID=tiny-test-image\n");
    expect(await two.fs.read("/etc/os-release")).toBe("ID=tiny-test-image\n");
    expect(await one.fs.read("/usr/local/bin/tool")).toBe("tool\n");

    const rootfs = store.get("tiny-shell:v1")!.rootfs;
    expect(existsSync(join(rootfs, "usr/local/bin/tool"))).toBe(false);
    expect(readFileSync(join(rootfs, "etc/os-release"), "utf8")).toBe("ID=tiny-test-image\n");

    // A new spec.runtime.envs reboots the sandbox, as on the platform: its own layer is reset to the image.
    const current = await sdk.SandboxInstance.get("tiny-one");
    const spec = { ...current.spec, runtime: { ...current.spec.runtime, envs: [{ name: "AFTER", value: "reboot" }] } };
    await sdk.updateSandbox({ path: { sandboxName: "tiny-one" }, body: { metadata: current.metadata, spec }, throwOnError: true });
    const rebooted = await sdk.SandboxInstance.get("tiny-one");
    expect(await run(rebooted, "cat /usr/local/bin/tool 2>/dev/null || echo none; cat /etc/os-release; echo $AFTER $FROM_IMAGE")).toBe("none\nID=tiny-test-image\nreboot tiny\n");
    await rebooted.fs.write("/tmp/after.txt", "the new layer works");
    expect(await rebooted.fs.read("/tmp/after.txt")).toBe("the new layer works");

    await sdk.SandboxInstance.delete("tiny-one");
    await sdk.SandboxInstance.delete("tiny-two");
  }, 120_000);
});
