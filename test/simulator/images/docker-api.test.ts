import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIGEST_LABEL, DockerBuilder } from "../../../simulator/images/builders.js";
import { inspectImagesViaSocket, localDockerSocket } from "../../../simulator/images/docker-api.js";
import { dockerUnavailable } from "../../../simulator/launcher/index.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { tarOf } from "./tar-writer.js";

/**
 * Image inspection through the Docker Engine API socket (docker-api.ts): the
 * same JSON as `docker image inspect`, asked only where the CLI itself would
 * use the local socket.
 */

describe("the socket the docker CLI would use", () => {
  const config = (currentContext?: string) => {
    const dir = trackedTempDir("docker-config-");
    writeFileSync(join(dir, "config.json"), JSON.stringify(currentContext ? { currentContext } : {}));
    return dir;
  };
  it("is the default socket, or DOCKER_HOST's unix:// path; none for another host, a context chosen by variable or in the CLI's config", () => {
    expect(localDockerSocket({ DOCKER_CONFIG: config() })).toBe("/var/run/docker.sock");
    expect(localDockerSocket({ DOCKER_CONFIG: config("default") })).toBe("/var/run/docker.sock");
    expect(localDockerSocket({ DOCKER_HOST: "unix:///run/user/1000/docker.sock" })).toBe("/run/user/1000/docker.sock");
    expect(localDockerSocket({ DOCKER_HOST: "tcp://10.0.0.2:2375" })).toBeUndefined();
    expect(localDockerSocket({ DOCKER_HOST: "ssh://me@build" })).toBeUndefined();
    expect(localDockerSocket({ DOCKER_CONTEXT: "remote" })).toBeUndefined();
    expect(localDockerSocket({ DOCKER_CONFIG: config("rootless") })).toBeUndefined();
  });

  it("a socket that does not answer: undefined (the caller asks the CLI)", async () => {
    expect(await inspectImagesViaSocket(["anything"], { DOCKER_HOST: `unix://${join(trackedTempDir("no-docker-"), "docker.sock")}` })).toBeUndefined();
  });
});

const why = await dockerUnavailable();
const usable = why === undefined && localDockerSocket() !== undefined;
const tag = `sandbox-kit-test/inspect-${randomBytes(4).toString("hex")}:v1`;

describe.skipIf(!usable)(`against the machine's Docker daemon${usable ? "" : ` (skipped: ${why ?? "the docker CLI uses no local socket here"})`}`, () => {
  beforeAll(() => {
    const tar = join(trackedTempDir("docker-inspect-"), "rootfs.tar");
    writeFileSync(tar, tarOf([{ name: "etc/motd", content: "inspected" }]));
    execFileSync("docker", ["import", "--change", `LABEL ${DIGEST_LABEL}=sha256:feed`, "--change", "ENV GREETING=hi", tar, tag], { stdio: "ignore" });
  });
  afterAll(() => {
    try {
      execFileSync("docker", ["image", "rm", "-f", tag], { stdio: "ignore" });
    } catch {
      /* already gone */
    }
  });

  it("answers what docker image inspect prints; null for an image the daemon does not have", async () => {
    const cli = JSON.parse(execFileSync("docker", ["image", "inspect", tag], { encoding: "utf8" })) as unknown[];
    const [viaSocket, missing] = (await inspectImagesViaSocket([tag, "sandbox-kit-test/no-such-image:v0"]))!;
    expect(viaSocket).toEqual(cli[0]);
    expect(missing).toBeNull();
    const builder = new DockerBuilder();
    expect(await builder.localImage(tag)).toEqual({ label: "sha256:feed" });
    expect(await builder.localImage("sandbox-kit-test/no-such-image:v0")).toBeUndefined();
  });
});
