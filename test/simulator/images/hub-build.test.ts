import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { streamProgress } from "../../../simulator/images/progress.js";
import { bwrapPath } from "../../../simulator/launcher/index.js";

/**
 * A real hub image, built with mmdebstrap from Debian's mirror. Building
 * takes minutes, so this runs when asked (SANDBOX_KIT_HUB_IMAGE_TEST=1, the
 * build goes to the shared per-user cache) or when that cache already holds
 * an up-to-date build (then it only checks it, in seconds).
 */
const cache = defaultImageCacheDir();
const store = new ImageStore({ dir: cache, docker: null });
const cached = (await store.locate("blaxel/base-image:latest")).kind === "stored";
const asked = process.env.SANDBOX_KIT_HUB_IMAGE_TEST === "1";
const skip = !asked && !cached ? "skipped: building a hub image takes minutes; run with SANDBOX_KIT_HUB_IMAGE_TEST=1 (or build it ahead: sandbox-sim images build blaxel/base-image)" : "";

describe.skipIf(skip !== "")(`the blaxel/base-image hub image${skip ? ` (${skip})` : ""}`, () => {
  it("is a Debian root filesystem with Node.js, npm, Python, pip, git and curl, and its manifest", { timeout: 45 * 60_000 }, async () => {
    const image = await store.ensure("blaxel/base-image:latest", streamProgress(process.stderr, "blaxel/base-image"));
    for (const tool of ["usr/bin/node", "usr/bin/npm", "usr/bin/python3", "usr/bin/pip3", "usr/bin/git", "usr/bin/curl", "usr/bin/bash", "etc/debian_version"]) {
      expect(existsSync(join(image.rootfs, tool)), tool).toBe(true);
    }
    expect(image.manifest).toMatchObject({ source: "recipe", origin: "base-image", config: { env: expect.arrayContaining(["HOME=/blaxel"]), workingDir: "/blaxel" } });
    expect(image.manifest.size).toBeGreaterThan(100 * 2 ** 20);
    expect(existsSync(join(image.rootfs, "blaxel"))).toBe(true);
    // Its programs run with the image as `/` (bubblewrap, where it is installed and may create namespaces).
    const bwrap = bwrapPath();
    if (!bwrap) return;
    let out: string;
    try {
      out = execFileSync(bwrap, ["--ro-bind", image.rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "sh", "-c", "node -p process.version && python3 -c 'import sys; print(sys.version_info[0])'"], { encoding: "utf8" });
    } catch (err) {
      console.warn(`not run inside the image: ${(err as Error).message.split("\n")[0]}`);
      return;
    }
    expect(out).toMatch(/^v2\d\.\d+\.\d+\n3\n$/);
  });
});
