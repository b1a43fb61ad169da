import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildAgentImage, ensureDockerDaemon } from "../helpers/docker.js";
import { sandboxAt } from "../helpers/sdk.js";
import { trackedTempDir } from "../helpers/temp-dirs.js";

/**
 * The agent's container image (Dockerfile, docs/container.md), built and run in a real Docker daemon, and
 * @blaxel/core's file, process and multipart calls against it — as a platform engineer ships it.
 */
const run = promisify(execFile);
const repo = resolve(import.meta.dirname, "../..");
const TOKEN = "container-token-0123456789";
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

const unavailable = await ensureDockerDaemon();
if (unavailable) console.warn(`agent image tests skipped: ${unavailable}`);

describe.skipIf(unavailable !== undefined)(`the sandbox-agent image in a real container${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  const name = `sandbox-kit-agent-test-${process.pid}`;
  let url = "";
  let built = { tag: "", seconds: 0 };

  beforeAll(async () => {
    built = await buildAgentImage(repo, "sandbox-kit/sandbox-agent:test");
    console.log(`agent image built in ${built.seconds.toFixed(1)} s`);
    const secrets = trackedTempDir("agent-image-secret-");
    chmodSync(secrets, 0o755);
    writeFileSync(join(secrets, "token"), `${TOKEN}\n`, { mode: 0o644 });
    await run("docker", [
      "run",
      "--detach",
      "--name",
      name,
      "--publish",
      "127.0.0.1::8080",
      "--mount",
      `type=bind,source=${join(secrets, "token")},target=/run/secrets/sandbox-agent-token,readonly`,
      built.tag,
    ]);
    const port = (await run("docker", ["port", name, "8080/tcp"])).stdout.trim().split("\n")[0]!.split(":").pop();
    url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 100; i++) {
      // docker-proxy accepts a connection before the agent listens and holds it: each try has its own deadline.
      const answered = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (answered) return;
      await sleep(100);
    }
    throw new Error(`the container did not answer /health: ${(await run("docker", ["logs", name])).stderr}`);
  }, 1_200_000);

  afterAll(async () => {
    await run("docker", ["rm", "--force", name]).catch(() => undefined);
  });

  it("runs as a non-root user, with the token from the secret file and not in its environment", async () => {
    const user = (await run("docker", ["exec", name, "id", "-u"])).stdout.trim();
    expect(user).toBe("10001");
    expect((await fetch(`${url}/filesystem/sandbox`)).status).toBe(401);
    const environ = (await run("docker", ["exec", name, "sh", "-c", "tr '\\0' '\\n' < /proc/1/environ"])).stdout;
    expect(environ).not.toContain(TOKEN);
  });

  it("@blaxel/core: files, a process and a multipart upload over 5 MiB", async () => {
    const sandbox = await sandboxAt(url, "container", { apiKey: TOKEN });
    await sandbox.fs.write("/sandbox/hello.txt", "hello from the sdk");
    expect(await sandbox.fs.read("/sandbox/hello.txt")).toBe("hello from the sdk");
    const exec = await sandbox.process.exec({ command: "cat /sandbox/hello.txt; id -un", waitForCompletion: true });
    expect(exec.exitCode).toBe(0);
    expect(exec.logs).toContain("hello from the sdk");
    expect(exec.logs).toContain("sandbox");
    const data = randomBytes(11 * 1024 * 1024);
    const written = await sandbox.fs.writeBinary("/sandbox/big.bin", data);
    expect(written).toMatchObject({ size: data.length, etag: expect.stringMatching(/-3$/) });
    const back = await sandbox.fs.readBinary("/sandbox/big.bin");
    expect(sha(new Uint8Array(await back.arrayBuffer()))).toBe(sha(data));
  });

  it("reports healthy through its HEALTHCHECK", async () => {
    let status = "";
    for (let i = 0; i < 60 && status !== "healthy"; i++) {
      status = (await run("docker", ["inspect", "--format", "{{.State.Health.Status}}", name])).stdout.trim();
      if (status !== "healthy") await sleep(500);
    }
    expect(status).toBe("healthy");
  }, 60_000);
});
