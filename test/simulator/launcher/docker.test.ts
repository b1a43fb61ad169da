import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSimConfig } from "../../../simulator/config.js";
import { containerEnvNames, dockerCliEnv, dockerRunArgs, IN_CONTAINER } from "../../../simulator/launcher/docker-args.js";
import { exitOf } from "../../../simulator/launcher/docker.js";
import { createLauncher, DockerLauncher, dockerPath, LaunchError, LAUNCHER_NAMES, type AgentHandle } from "../../../simulator/launcher/index.js";
import { exec, specFor, tempBase } from "./helpers.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../../helpers/docker.js";

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

  it("never puts the token or the sandbox's variable values in argv, only their names", () => {
    expect(argv.join(" ")).not.toContain(spec.token);
    expect(argv.join(" ")).not.toContain("s3cret-value");
    const names = argv.flatMap((a, i) => (argv[i - 1] === "--env" ? [a] : []));
    expect(names.sort()).toEqual(["API_KEY", "GREETING", "HOME"]);
    // The token is handed over in a file the agent deletes once read, never in its environment.
    expect(argv.slice(-3)).toEqual(["--token-file", `${IN_CONTAINER.data}/token.handoff`, "--token-file-remove"]);
    const env = dockerCliEnv(spec, { PATH: "/usr/bin", HOME: "/home/me", DOCKER_HOST: "unix:///x.sock", OPENAI_API_KEY: "simulator-secret" });
    expect(env.SANDBOX_AGENT_TOKEN).toBeUndefined();
    expect(env).toMatchObject({
      API_KEY: "s3cret-value",
      GREETING: "hi",
      HOME: IN_CONTAINER.root,
      DOCKER_HOST: "unix:///x.sock",
      DOCKER_CONFIG: "/home/me/.docker",
      PATH: "/usr/bin",
    });
    expect(env.OPENAI_API_KEY).toBeUndefined(); // the simulator's own secrets stay out
  });

  it("runs spec.runtime.image with the agent and node mounted read-only, the sandbox's files read-write, on a loopback port", () => {
    expect(argv.slice(0, 3)).toEqual(["run", "--detach", "--init"]);
    expect(argv).toContain("--publish");
    expect(argv[argv.indexOf("--publish") + 1]).toBe("127.0.0.1::8080");
    const mounts = argv.flatMap((a, i) => (argv[i - 1] === "--mount" ? [a] : []));
    expect(mounts).toEqual([
      "type=bind,source=/usr/bin/node,target=/opt/sandbox-kit/bin/node,readonly",
      "type=bind,source=/srv/kit/package.json,target=/opt/sandbox-kit/package.json,readonly",
      "type=bind,source=/srv/kit/dist,target=/opt/sandbox-kit/dist,readonly",
      "type=bind,source=/srv/kit/node_modules,target=/opt/sandbox-kit/node_modules,readonly",
      "type=bind,source=/data/one/root,target=/sandbox",
      "type=bind,source=/data/one/data,target=/run/sandbox-agent",
      "type=bind,source=/data/drives/ws,target=/run/sandbox-drives",
    ]);
    const image = argv.indexOf("python:3.12");
    expect(argv[image - 2]).toBe("--entrypoint");
    expect(argv[image - 1]).toBe("/opt/sandbox-kit/bin/node");
    const agent = argv.slice(image + 1);
    expect(agent[0]).toBe("/opt/sandbox-kit/dist/sandbox-agent/main.js");
    expect(agent.join(" ")).toContain("--host 0.0.0.0 --port 8080 --root /sandbox --data-dir /run/sandbox-agent --sandbox-name one");
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
    expect(containerEnvNames({})).toEqual(["HOME"]);
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
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.stop(1_000)));
  });

  it("runs the agent in a container of the image: its tools, the sandbox's files and environment", async () => {
    const spec = specFor(base, "boxed", { image, env: { GREETING: "from the container" } });
    const agent = await launcher.start(spec);
    handles.push(agent);
    expect(agent.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${agent.url}/health`)).status).toBe(200);
    const os = await exec(agent.url, spec.token, "cat /etc/os-release");
    expect(os.stdout).toMatch(/debian|ubuntu|ID=/i); // the image's own files, not the sandbox's
    expect((await exec(agent.url, spec.token, "echo $GREETING > said.txt && pwd")).stdout.trim()).toBe("/sandbox");
    expect(readFileSync(join(spec.rootDir, "said.txt"), "utf8")).toBe("from the container\n");
    writeFileSync(join(spec.rootDir, "from-host.txt"), "host");
    expect((await exec(agent.url, spec.token, "cat from-host.txt")).stdout).toBe("host");
    await agent.stop(5_000);
    // Stopped and removed: no container is left for the sandbox's data dir.
    expect(execFileSync("docker", ["ps", "--all", "--quiet", "--filter", `label=sandbox-kit.data-dir=${spec.dataDir}`], { encoding: "utf8" }).trim()).toBe("");
  }, 240_000);

  it("reports a container that dies as the agent's exit", async () => {
    const spec = specFor(base, "killed", { image });
    const agent = await launcher.start(spec);
    handles.push(agent);
    const names = execFileSync("docker", ["ps", "--quiet", "--filter", `label=sandbox-kit.data-dir=${spec.dataDir}`], { encoding: "utf8" }).trim();
    execFileSync("docker", ["kill", names]);
    const exit = await agent.exited;
    expect(exit.signal).toBe("SIGKILL");
  }, 240_000);
});
