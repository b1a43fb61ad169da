import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { dockerUnavailable } from "../../../simulator/launcher/index.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { tarOf } from "./tar-writer.js";

/**
 * The Docker source and `docker save` archives, against the machine's real
 * daemon: no registry is reachable, so the test image is made with
 * `docker import` of a tiny root filesystem.
 */
const why = await dockerUnavailable();
const tag = `sandbox-kit-test/tiny-${randomBytes(4).toString("hex")}:v1`;

describe.skipIf(why !== undefined)(`images from the Docker daemon${why ? ` (skipped: ${why})` : ""}`, () => {
  let work: string;
  beforeAll(() => {
    work = trackedTempDir("docker-images-");
    writeFileSync(
      join(work, "rootfs.tar"),
      tarOf([
        { name: "bin/", type: "dir" },
        { name: "bin/greet", content: "#!/bin/sh\necho from docker\n", mode: 0o755 },
        { name: "etc/motd", content: "docker image" },
      ]),
    );
    execFileSync("docker", ["import", "--change", "ENV GREETING=docker", "--change", "WORKDIR /srv", join(work, "rootfs.tar"), tag], { stdio: "ignore" });
  });
  afterAll(() => {
    try {
      execFileSync("docker", ["image", "rm", "-f", tag], { stdio: "ignore" });
    } catch {
      /* already gone */
    }
  });

  it("exports an image the daemon holds into the store, with its config, and reuses it while the daemon's image is the same", async () => {
    const store = new ImageStore({ dir: join(work, "store") });
    expect(await store.locate(tag)).toMatchObject({ kind: "docker" });
    const image = await store.ensure(tag);
    expect(readFileSync(join(image.rootfs, "etc/motd"), "utf8")).toBe("docker image");
    expect(image.manifest).toMatchObject({ source: "docker", config: { env: expect.arrayContaining(["GREETING=docker"]), workingDir: "/srv" } });
    expect(image.manifest.digest).toBe(execFileSync("docker", ["image", "inspect", "--format", "{{.Id}}", tag], { encoding: "utf8" }).trim());
    expect(await store.locate(tag)).toMatchObject({ kind: "stored" });
    // No container is left behind by the export.
    expect(execFileSync("docker", ["ps", "-a", "--filter", `ancestor=${tag}`, "--format", "{{.ID}}"], { encoding: "utf8" }).trim()).toBe("");
  });

  it("imports a docker save archive", async () => {
    const archive = join(work, "saved.tar");
    execFileSync("docker", ["save", "-o", archive, tag]);
    const store = new ImageStore({ dir: join(work, "saved-store"), docker: null });
    const image = await store.import(archive, "saved/tiny:v1");
    expect(readFileSync(join(image.rootfs, "bin/greet"), "utf8")).toContain("from docker");
    expect(image.manifest.config.env).toContain("GREETING=docker");
    expect(existsSync(join(image.rootfs, "etc/motd"))).toBe(true);
  });
});
