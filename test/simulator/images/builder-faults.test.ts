import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { DockerBuilder, findBuilder } from "../../../simulator/images/builders.js";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { builderTag, buildTemplate, TemplateBuildError } from "../../../simulator/images/template-build.js";
import { pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * The builder's failures leave nothing behind: a `docker import` that fails without reading its input no longer
 * leaves `tar` blocked on the pipe (which kept `sandbox-sim images build` alive for ever), and a failed `docker
 * build` leaves neither its step's container nor the images the simulator gave the builder for it.
 */

const found = await findBuilder();
const dockerSkip = found.builder?.kind === "docker" ? "" : ` (skipped: no Docker daemon answers here: ${found.unavailable.join("; ") || "buildah only"})`;
const docker = (...args: string[]) => execFileSync("docker", args, { encoding: "utf8" }).trim();
const containerIds = () => new Set(docker("ps", "-aq", "--no-trunc").split("\n").filter(Boolean));

describe.skipIf(dockerSkip !== "")(`the builder's faults${dockerSkip}`, () => {
  it("a docker import refused before reading its input (a digest reference) fails, and its tar is ended with it", async () => {
    // Several pipe buffers of content: tar cannot finish writing into a pipe nobody reads.
    const rootfs = trackedTempDir("builder-fault-rootfs-");
    writeFileSync(join(rootfs, "filler"), randomBytes(4 * 2 ** 20));
    const name = `sandbox-kit-test/fault:v1@sha256:${"a".repeat(64)}`;
    const failure = await new DockerBuilder().importRootfs(rootfs, name, { env: [], workingDir: "/" }, "sha256:test").then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failure?.message).toMatch(/docker import failed/);
    expect(failure?.message).toContain("digest");
    // The rejection comes once both children have ended: no tar of that directory is left.
    expect(pidsWithMarker(rootfs)).toEqual([]);
  }, 60_000);

  describe("a failed docker build", () => {
    const cache = trackedTempDir("builder-fault-store-");
    const store = new ImageStore({ dir: cache, docker: null });
    const NAME = "sandbox-kit-test/failing-build:v1";
    const SANDBOX_API = "ghcr.io/blaxel-ai/sandbox:builder-fault-test";
    afterAll(async () => {
      await found.builder?.remove(SANDBOX_API);
      await found.builder?.remove(builderTag(NAME));
    }, 60_000);

    it("leaves no exited container and removes what the simulator tagged for it", async () => {
      const before = containerIds();
      const dir = trackedTempDir("builder-fault-ctx-");
      // FROM the sandbox-api stand-in (an image the simulator gives the builder), a step that fails.
      writeFileSync(join(dir, "Dockerfile"), `FROM ${SANDBOX_API}\nRUN ["/sandbox-api-missing-shell", "-c", "exit 3"]\n`);
      const failure = await buildTemplate(store, NAME, dir, { builder: found.builder }).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(failure).toBeInstanceOf(TemplateBuildError);
      expect(failure?.message).toContain("docker build of");
      expect(failure?.message).toContain("--- build log (last lines) ---");
      // The step's container is removed by --force-rm (the daemon removes it just after the build exits).
      let added: string[] = [];
      for (let i = 0; i < 40; i++) {
        added = [...containerIds()].filter((id) => !before.has(id));
        if (added.length === 0) break;
        await sleep(250);
      }
      expect(added).toEqual([]);
      expect(await found.builder!.localImage(SANDBOX_API)).toBeUndefined();
      expect(await found.builder!.localImage(builderTag(NAME))).toBeUndefined();
      expect(store.get(NAME)).toBeUndefined();
    }, 120_000);
  });
});
