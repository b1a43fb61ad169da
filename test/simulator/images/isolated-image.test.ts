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
import { applyLayer } from "../../../simulator/images/layer.js";
import { silentProgress } from "../../../simulator/images/progress.js";
import { chunks, tarOf, writeOciLayout, type TestEntry } from "./tar-writer.js";

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
  entries.push({ name: "usr/local/bin/base-tool", content: "base's\n" });
  entries.push({ name: "etc/base-only", content: "deleted by the template\n" });
  return entries;
}

beforeAll(async () => {
  if (isolationUnavailable) return;
  const cache = trackedTempDir("iso-images-");
  store = new ImageStore({ dir: cache, docker: null });
  const layout = join(trackedTempDir("iso-layout-"), "oci");
  writeOciLayout(layout, [tinyImageFiles()], { config: { Env: ["PATH=/usr/local/bin:/usr/bin:/bin", "FROM_IMAGE=tiny"], WorkingDir: "/" } });
  const base = await store.import(layout, "tiny-shell:v1");
  // A template stacked over it, as a Docker-built template is stored (base-copy.ts): its own layer only, with
  // a change, an addition, an overlay whiteout (a character device 0/0) deleting a base file, and an opaque directory.
  await store.installBuilt("tiny-template:v1", "test", silentProgress, async (rootfs) => {
    const layer = tarOf([
      { name: "etc/", type: "dir" },
      { name: "etc/os-release", content: "ID=tiny-template\n" },
      { name: "etc/base-only", type: "char", dev: [0, 0] },
      { name: "usr/", type: "dir" },
      { name: "usr/local/", type: "dir" },
      { name: "usr/local/bin/", type: "dir", xattrs: { "trusted.overlay.opaque": "y" } },
      { name: "usr/local/bin/from-template", content: "template's\n" },
    ]);
    await applyLayer(rootfs, chunks(layer), { whiteouts: "overlay", below: base.layers });
    return {
      digest: `sha256:${"7".repeat(64)}`,
      config: { env: ["PATH=/usr/local/bin:/usr/bin:/bin", "FROM_IMAGE=template"], workingDir: "/", entrypoint: [], cmd: [], user: "" },
      base: base.manifest.digest,
    };
  });
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
    expect(await run(rebooted, "cat /usr/local/bin/tool 2>/dev/null || echo none; cat /etc/os-release; echo $AFTER $FROM_IMAGE")).toBe(
      "none\nID=tiny-test-image\nreboot tiny\n",
    );
    await rebooted.fs.write("/tmp/after.txt", "the new layer works");
    expect(await rebooted.fs.read("/tmp/after.txt")).toBe("the new layer works");

    await sdk.SandboxInstance.delete("tiny-one");
    await sdk.SandboxInstance.delete("tiny-two");
  }, 120_000);

  it("a template stacked over its base image: the sandbox sees the template's files over the base's, its deletions and opaque directories; the sandbox's own writes and deletions stay in its layer", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "tiny-stacked", image: "tiny-template:v1" });
    const run = async (command: string) => (await sandbox.process.exec({ command, waitForCompletion: true })).logs ?? "";
    const template = store.get("tiny-template:v1")!;
    const base = store.get("tiny-shell:v1")!;
    expect(template.layers).toEqual([template.rootfs, base.rootfs]);

    expect(await run("cat /etc/os-release; echo $FROM_IMAGE; ls /usr/local/bin; cat /etc/base-only 2>/dev/null || echo base-only-gone")).toBe(
      "ID=tiny-template\ntemplate\nfrom-template\nbase-only-gone\n",
    );
    expect(await sandbox.fs.read("/usr/local/bin/from-template")).toBe("template's\n");
    // The commands above ran the base's /bin/sh, cat and ls (the template has none); /etc merges both layers.
    const etc = (await run("ls /etc")).split("\n");
    expect(etc).toContain("os-release");
    expect(etc).not.toContain("base-only");

    await sandbox.fs.write("/etc/os-release", "ID=changed-in-sandbox\n");
    await sandbox.fs.rm("/usr/local/bin/from-template");
    expect(await run("cat /etc/os-release; ls /usr/local/bin; echo end")).toBe("ID=changed-in-sandbox\nend\n");
    expect(readFileSync(join(template.rootfs, "etc/os-release"), "utf8")).toBe("ID=tiny-template\n");
    expect(readFileSync(join(template.rootfs, "usr/local/bin/from-template"), "utf8")).toBe("template's\n");
    expect(readFileSync(join(base.rootfs, "etc/os-release"), "utf8")).toBe("ID=tiny-test-image\n");
    expect(readFileSync(join(base.rootfs, "etc/base-only"), "utf8")).toBe("deleted by the template\n");
    await sdk.SandboxInstance.delete("tiny-stacked");
  }, 120_000);
});
