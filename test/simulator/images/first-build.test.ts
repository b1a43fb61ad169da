import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ImageStore } from "../../../simulator/images/image-store.js";
import type { Progress } from "../../../simulator/images/progress.js";
import { buildHooks, recipeBuildUnavailable } from "../../../simulator/images/recipe-build.js";
import { SandboxImages } from "../../../simulator/images/sandbox-images.js";
import { eventually } from "../launcher/helpers.js";
import { pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * The start-up build and a create that arrives while it runs: one build, whose
 * progress both hear; a closed store ends it and leaves no work dir. Real
 * mmdebstrap against Debian's mirror, stopped after its first steps.
 */
function recorder(): Progress & { lines: string[] } {
  const lines: string[] = [];
  return { lines, phase: (l) => lines.push(`phase ${l}`), advance() {}, note: (t) => lines.push(`note ${t}`) };
}

const unavailable = await recipeBuildUnavailable({ mmdebstrap: "mmdebstrap", npm: "npm", npmCache: "" });
describe.skipIf(unavailable !== undefined)(`the default image's start-up build${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  it("a create arriving during the start-up build joins it (one build), and a closed store ends it", async () => {
    const dir = trackedTempDir("first-build-");
    const store = new ImageStore({ dir, docker: null, hostAptArchives: null });
    const images = new SandboxImages(store, true);
    const startup = recorder();
    const prebuilt = images.prebuild("blaxel/base-image:latest", startup);
    expect(images.prebuildStatus()).toMatchObject({ image: "blaxel/base-image:latest", state: "building" });
    await eventually(() => startup.lines.some((l) => l.startsWith("note ")), 30_000);
    // GET /health's defaultImage: the phase, and mmdebstrap's latest step within it.
    expect(images.prebuildStatus()).toMatchObject({ state: "building", phase: expect.stringMatching(/mmdebstrap/), step: expect.any(String) });
    const create = recorder();
    const joined = images.resolve(undefined, create).catch((err: Error) => err);
    await eventually(() => create.lines.length > 1, 30_000);
    expect(create.lines[0]).toMatch(/^note joining the build of blaxel\/base-image:latest under way \(building a Debian/);
    expect(readdirSync(join(dir, "tmp")), "one work dir: one build").toHaveLength(1);
    expect(pidsWithMarker(`--include=`).filter((pid) => pidsWithMarker(dir).includes(pid)).length).toBeGreaterThan(0);
    await store.close();
    const [status, failure] = await Promise.all([prebuilt, joined]);
    expect(status).toMatchObject({ state: "failed", error: expect.stringMatching(/mmdebstrap/) });
    expect(failure).toBeInstanceOf(Error);
    expect(readdirSync(join(dir, "tmp")), "the work dir is removed").toEqual([]);
    expect(readdirSync(join(dir, "images"))).toEqual([]);
    await eventually(() => pidsWithMarker(dir).length === 0, 10_000);
  }, 90_000);
});

describe("the build's cache hooks", () => {
  it("link the store's and the host's packages in, keep what the build downloaded, and leave docs out", () => {
    const hooks = buildHooks("/store/apt-cache", "/nonexistent-host-archives");
    expect(hooks.filter((h) => h.startsWith("--setup-hook=")).join("\n")).toMatch(/cp -fl -t "\$1"\/var\/cache\/apt\/archives/);
    // A host dir that does not exist is not used; the store's cache is filled from the chroot's.
    expect(hooks.join("\n")).not.toMatch(/find '\/nonexistent-host-archives'/);
    expect(hooks.some((h) => h.startsWith("--customize-hook=for f in") && h.includes("'/store/apt-cache'"))).toBe(true);
    expect(hooks.some((h) => h.includes("path-exclude=/usr/share/man/*"))).toBe(true);
  });
});
