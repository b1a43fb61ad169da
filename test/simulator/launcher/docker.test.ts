import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { readLayer } from "../../../simulator/launcher/docker-files.js";
import { dockerImageSupply } from "../../../simulator/images/docker-supply.js";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSimConfig } from "../../../simulator/config.js";
import { dockerCliEnv, dockerRunArgs, IN_CONTAINER, sandboxVariables, writeEnvHandoff } from "../../../simulator/launcher/docker-args.js";
import { exitOf } from "../../../simulator/launcher/docker.js";
import { createLauncher, DockerLauncher, dockerPath, LaunchError, LAUNCHER_NAMES, type AgentHandle } from "../../../simulator/launcher/index.js";
import { exec, specFor, tempBase } from "./helpers.js";
import { ensureDockerDaemon, ensureLocalBaseImage, filesImages, removeFilesImagesSince } from "../../helpers/docker.js";

/**
 * The docker launcher: its `docker run` argv and environment are checked
 * everywhere; the agent in a real container only where a Docker daemon answers
 * (`docker info`), else those tests are skipped with the reason.
 * Image for the container tests: SANDBOX_KIT_DOCKER_TEST_IMAGE (default
 * debian:bookworm-slim, whose glibc runs the host's node from Debian 12).
 */
const inputs = { name: "sbx-ws-one-abcd", agentMain: "/srv/kit/dist/sandbox-agent/main.js", node: "/usr/bin/node", user: "1000:1000" };

describe("docker launcher: the docker run command", () => {
  const spec = specFor("/data", "one", { env: { API_KEY: "s3cret-value", GREETING: "hi" }, image: "python:3.12", drivesDir: "/data/drives/ws" });
  const argv = dockerRunArgs(spec, inputs);

  it("never puts the token or the sandbox's variables in argv or the container's config: they go in hand-off files", () => {
    expect(argv.join(" ")).not.toContain(spec.token);
    expect(argv.join(" ")).not.toContain("s3cret-value");
    expect(argv).not.toContain("--env");
    // The token is handed over in a file the agent deletes once read, never in its environment.
    expect(argv.slice(-3)).toEqual(["--token-file", `${IN_CONTAINER.data}/token.handoff`, "--token-file-remove"]);
    // The variables in another, read (and deleted) by the container's first program before the agent starts.
    const entry = argv.indexOf("/opt/sandbox-kit/dist/simulator/launcher/container-entry.js");
    expect(argv.slice(entry + 1, entry + 3)).toEqual([`${IN_CONTAINER.data}/env.handoff`, "/opt/sandbox-kit/dist/sandbox-agent/main.js"]);
    const dir = tempBase("docker-env-");
    writeEnvHandoff({ dataDir: dir, env: { ...spec.env, SANDBOX_AGENT_TOKEN: "never" } });
    expect(JSON.parse(readFileSync(join(dir, "env.handoff"), "utf8"))).toEqual({ API_KEY: "s3cret-value", GREETING: "hi" });
    expect(statSync(join(dir, "env.handoff")).mode & 0o777).toBe(0o600);
    expect(sandboxVariables({})).toEqual({});
    const env = dockerCliEnv({ PATH: "/usr/bin", HOME: "/home/me", DOCKER_HOST: "unix:///x.sock", OPENAI_API_KEY: "simulator-secret" });
    expect(env).toEqual({ DOCKER_HOST: "unix:///x.sock", DOCKER_CONFIG: "/home/me/.docker", PATH: "/usr/bin" });
  });

  it("runs spec.runtime.image with the agent and node mounted read-only, its data read-write, `/` its own, on a loopback port", () => {
    expect(argv.slice(0, 3)).toEqual(["run", "--detach", "--init"]);
    expect(argv).toContain("--publish");
    expect(argv[argv.indexOf("--publish") + 1]).toBe("127.0.0.1::8080");
    const mounts = argv.flatMap((a, i) => (argv[i - 1] === "--mount" ? [a] : []));
    expect(mounts).toEqual([
      "type=bind,source=/usr/bin/node,target=/opt/sandbox-kit/bin/node,readonly",
      "type=bind,source=/srv/kit/package.json,target=/opt/sandbox-kit/package.json,readonly",
      "type=bind,source=/srv/kit/dist,target=/opt/sandbox-kit/dist,readonly",
      "type=bind,source=/srv/kit/node_modules,target=/opt/sandbox-kit/node_modules,readonly",
      "type=bind,source=/data/one/data,target=/run/sandbox-agent",
      "type=bind,source=/data/drives/ws,target=/run/sandbox-drives",
    ]);
    const image = argv.indexOf("python:3.12");
    expect(argv[image - 2]).toBe("--entrypoint");
    expect(argv[image - 1]).toBe("/opt/sandbox-kit/bin/node");
    const agent = argv.slice(image + 1);
    expect(agent[0]).toBe("/opt/sandbox-kit/dist/simulator/launcher/container-entry.js");
    expect(agent[2]).toBe("/opt/sandbox-kit/dist/sandbox-agent/main.js");
    expect(agent.join(" ")).toContain("--host 0.0.0.0 --port 8080 --root / --data-dir /run/sandbox-agent --sandbox-name one");
    // The image's WorkingDir, as on the platform (no --workdir).
    expect(argv).not.toContain("--workdir");
    expect(agent.join(" ")).toContain("--drives-dir /run/sandbox-drives --drives-existing-only");
    expect(argv[argv.indexOf("--user") + 1]).toBe("1000:1000");
  });

  it("with the simulator's egress: its own network instead of a published port, the CA bundle as the system store, the relay", () => {
    const withNet = dockerRunArgs(spec, {
      ...inputs,
      network: {
        name: "sbx-ws-one-abcd-net",
        relay: "8081=172.19.0.1:40000",
        caBundle: "/data/one/data/etc/ca-bundle.crt",
        hostsFile: "/data/one/data/etc/hosts",
      },
    });
    // The simulator's names (--public-url host, host-form previews) in a hosts file it keeps current.
    expect(withNet).toContain("type=bind,source=/data/one/data/etc/hosts,target=/etc/hosts,readonly");
    expect(withNet).not.toContain("--publish");
    expect(withNet[withNet.indexOf("--network") + 1]).toBe("sbx-ws-one-abcd-net");
    expect(withNet).toContain("type=bind,source=/data/one/data/etc/ca-bundle.crt,target=/etc/ssl/certs/ca-certificates.crt,readonly");
    expect(withNet.slice(-2)).toEqual(["--egress-relay", "8081=172.19.0.1:40000"]);
  });

  it("refuses a path --mount cannot carry, and falls back to an image when the spec names none", () => {
    expect(() => dockerRunArgs(specFor("/data/a,b", "one"), inputs)).toThrow(LaunchError);
    expect(dockerRunArgs(specFor("/data", "one"), { ...inputs, image: "node:20-bookworm" })).toContain("node:20-bookworm");
    expect(dockerRunArgs(specFor("/data", "one"), inputs)).toContain("debian:bookworm-slim");
  });

  it("reads exit code 128 + n as signal n", () => {
    expect(exitOf(137, "killed")).toEqual({ code: null, signal: "SIGKILL", stderr: "killed" });
    expect(exitOf(143, "")).toMatchObject({ signal: "SIGTERM" });
    expect(exitOf(1, "boom")).toEqual({ code: 1, signal: null, stderr: "boom" });
    expect(exitOf(null, "")).toEqual({ code: null, signal: null, stderr: "" });
  });

  it("is selected by --launcher docker", () => {
    expect(LAUNCHER_NAMES).toContain("docker");
    const config = parseSimConfig(["--launcher", "docker"], {});
    expect(config !== "help" && config.launcher).toBe("docker");
    expect(() => parseSimConfig(["--launcher", "kvm"], {})).toThrow(/launcher/);
    if (dockerPath()) expect(createLauncher("docker").name).toBe("docker");
    else expect(() => createLauncher("docker")).toThrow(/docker CLI/);
  });
});

const unavailable = await ensureDockerDaemon();
if (unavailable) console.warn(`docker launcher container tests skipped: ${unavailable}`);

describe.runIf(unavailable !== undefined && dockerPath() !== undefined)("docker launcher without a daemon", () => {
  it("a start fails with docker's own reason, naming the sandbox", async () => {
    const base = tempBase("docker-nodaemon-");
    const error = await new DockerLauncher().start(specFor(base, "nowhere")).catch((err: Error) => err);
    expect(error).toBeInstanceOf(LaunchError);
    expect((error as Error).message).toMatch(/docker run for sandbox "nowhere" failed .*daemon/i);
  });
});

describe.skipIf(unavailable !== undefined)(`docker launcher with a daemon${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  // No registry here: a local Debian image (test/helpers/docker.ts) unless one is named.
  let image = "";
  beforeAll(async () => {
    image = process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? (await ensureLocalBaseImage());
  }, 1_200_000);
  const base = tempBase("docker-launcher-");
  const launcher = new DockerLauncher({ readyTimeoutMs: 180_000 });
  const handles: AgentHandle[] = [];
  const filesBefore = filesImages();
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.stop(1_000)));
    removeFilesImagesSince(filesBefore);
  });

  it("runs the agent in a container of the image: one `/` for files and commands, kept across containers by docker commit", async () => {
    const spec = specFor(base, "boxed", { image, env: { GREETING: "from the container" } });
    const agent = await launcher.start(spec);
    handles.push(agent);
    expect(agent.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${agent.url}/health`)).status).toBe(200);
    const os = await exec(agent.url, spec.token, "cat /etc/os-release");
    expect(os.stdout).toMatch(/debian|ubuntu|ID=/i);
    expect((await exec(agent.url, spec.token, "echo $GREETING > /tmp/said.txt && cat /tmp/said.txt")).stdout).toBe("from the container\n");
    // The variables are not in the container's config (docker inspect) and their hand-off file is gone.
    const config = execFileSync("docker", ["ps", "--quiet", "--filter", `label=sandbox-kit.data-dir=${spec.dataDir}`], { encoding: "utf8" }).trim();
    expect(execFileSync("docker", ["inspect", "--format", "{{json .Config.Env}}", config], { encoding: "utf8" })).not.toContain("from the container");
    expect(existsSync(join(spec.dataDir, "env.handoff"))).toBe(false);
    // The file API's / is the commands' /: a file written through it is there for a command.
    const put = await fetch(`${agent.url}/filesystem/usr/local/bin/hello`, {
      method: "PUT",
      headers: { authorization: `Bearer ${spec.token}`, "content-type": "application/json" },
      body: JSON.stringify({ content: "#!/bin/sh\necho hello from $0\n", permissions: "755" }),
    });
    expect(put.status).toBe(200);
    expect((await exec(agent.url, spec.token, "hello")).stdout).toBe("hello from /usr/local/bin/hello\n");
    await agent.stop(5_000);
    // Stopped and removed: no container is left for the sandbox's data dir; its files are an image the root names.
    expect(execFileSync("docker", ["ps", "--all", "--quiet", "--filter", `label=sandbox-kit.data-dir=${spec.dataDir}`], { encoding: "utf8" }).trim()).toBe("");
    const layer = readLayer(spec.rootDir)!;
    expect(layer.base).toBe(image);
    // The next container of the sandbox (a restart, an unarchive) has them; a copy (fork, snapshot) has its own image.
    const again = await launcher.start({ ...spec, token: "second-token-0123456789" });
    handles.push(again);
    expect((await exec(again.url, "second-token-0123456789", "cat /tmp/said.txt && hello")).stdout).toBe(
      "from the container\nhello from /usr/local/bin/hello\n",
    );
    const copy = join(base, "boxed-copy", "root");
    await launcher.copyTree(spec.rootDir, copy);
    expect(readLayer(copy)!.image).not.toBe(readLayer(spec.rootDir)!.image);
    await again.stop(5_000);
    const kept = readLayer(spec.rootDir)!.image;
    launcher.removeTree(join(base, "boxed-copy"));
    launcher.removeTree(join(base, "boxed"));
    expect(execFileSync("docker", ["images", "--quiet", kept], { encoding: "utf8" }).trim()).toBe("");
  }, 240_000);

  it("a sandbox whose image neither the daemon nor the image store has fails naming the image and the engine", async () => {
    const store = new ImageStore({ dir: tempBase("docker-store-"), docker: null });
    const withStore = new DockerLauncher();
    withStore.useImages(dockerImageSupply(store, () => {}));
    const error = await withStore.start(specFor(base, "no-image", { image: "sandbox-kit-test/nowhere:1" })).catch((err: Error) => err);
    expect(error).toBeInstanceOf(LaunchError);
    expect((error as Error).message).toMatch(/^image sandbox-kit-test\/nowhere:1 is not in the Docker engine of this host and cannot be given to it: /);
    expect(execFileSync("docker", ["ps", "--all", "--quiet", "--filter", `label=sandbox-kit.sandbox=ws/no-image`], { encoding: "utf8" }).trim()).toBe("");
    await store.close();
  }, 60_000);

  it("reports a container that dies as the agent's exit", async () => {
    const spec = specFor(base, "killed", { image });
    const agent = await launcher.start(spec);
    handles.push(agent);
    const names = execFileSync("docker", ["ps", "--quiet", "--filter", `label=sandbox-kit.data-dir=${spec.dataDir}`], { encoding: "utf8" }).trim();
    execFileSync("docker", ["kill", names]);
    const exit = await agent.exited;
    expect(exit.signal).toBe("SIGKILL");
    // Its files were kept (committed) all the same; removing the sandbox's directory removes them.
    const kept = readLayer(spec.rootDir)!.image;
    launcher.removeTree(join(base, "killed"));
    expect(execFileSync("docker", ["images", "--quiet", kept], { encoding: "utf8" }).trim()).toBe("");
  }, 240_000);
});
