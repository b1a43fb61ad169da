import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { findBuilder } from "../../../simulator/images/builders.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { builderTag } from "../../../simulator/images/template-build.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * ImageInstance.build through @blaxel/core against a started simulator, as upstream's IMAGE_BUILD tests run it:
 * PUT /sandboxes/{name}?upload=true (404) then POST /sandboxes?upload=true answer X-Blaxel-Upload-Url, the SDK
 * uploads its zipped context there and polls until DEPLOYED. Offline, `FROM node:20-slim` and a pinned
 * `node:22-alpine@sha256:…` get the stand-ins built from Debian packages (kept in the per-user store, so
 * built once per machine); the Alpine one's apk installs Debian equivalents.
 */

const found = await findBuilder();
const skip =
  (found.builder ? "" : ` (skipped: no image builder here: ${found.unavailable.join("; ")})`) ||
  (isolationUnavailable ? ` (skipped: ${isolationUnavailable})` : "");
const store = new ImageStore({ dir: defaultImageCacheDir() });
const suffix = randomBytes(3).toString("hex");
const SERVER = `const http = require("http"); http.createServer((req, res) => { res.writeHead(200); res.end("hello-from-app"); }).listen(8080, () => console.log("listening on 8080"));`;

/** The Docker image id of a name or id, undefined when the daemon has none (or the builder is buildah). */
function dockerImageId(name: string): string | undefined {
  if (found.builder?.kind !== "docker") return undefined;
  try {
    return execFileSync("docker", ["image", "inspect", "--format", "{{.Id}}", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return undefined;
  }
}

type Sdk = Awaited<ReturnType<typeof sdkForSimulator>>;
interface SandboxEvent {
  type?: string;
  status?: string;
  message?: string;
}

describe.skipIf(skip !== "")(`images built from ImageInstance through the SDK${skip}`, () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  const names: string[] = [];
  beforeAll(async () => {
    sim = await serveSimulator({ port: 0, apiKey: "image-build-key", workspace: "image-builds", logLevel: "silent", imageCache: defaultImageCacheDir() });
    sdk = await sdkForSimulator(sim.env);
  });
  afterAll(async () => {
    for (const name of names) await sdk.SandboxInstance.delete(name).catch(() => undefined);
    await sim?.stop();
    for (const name of names) {
      for (const image of store.list().filter((i) => i.ref.startsWith(`sandbox/${name}:`))) store.remove(image.ref);
      await found.builder?.remove(builderTag(`sandbox/${name}:latest`));
    }
  }, 180_000);

  const eventsOf = async (name: string): Promise<SandboxEvent[]> =>
    ((await sdk.getSandbox({ path: { sandboxName: name } })).data?.events ?? []) as SandboxEvent[];
  const run = async (sandbox: Awaited<ReturnType<Sdk["SandboxInstance"]["get"]>>, command: string) =>
    (await sandbox.process.exec({ command, waitForCompletion: true })).logs ?? "";

  it("builds FROM node:20-slim into a sandbox (UPLOADING, BUILDING, DEPLOYED), the build's lines in its events; a rebuild reuses the layers and reboots it on the new image", async () => {
    const name = `sdk-build-${suffix}`;
    names.push(name);
    const statuses: string[] = [];
    const image = sdk.ImageInstance.fromRegistry("node:20-slim").workdir("/app").runCommands(`echo '${SERVER}' > server.js`).env({ STAGE: "one" }).expose(8080);
    const built = await image.build({ name, memory: 2048, timeout: 900_000, onStatusChange: (s) => statuses.push(s) });
    expect(built.metadata?.name).toBe(name);
    expect(built.status).toBe("DEPLOYED");
    expect(statuses.at(-1)).toBe("DEPLOYED");
    expect(statuses.some((s) => ["UPLOADING", "BUILDING", "DEPLOYING"].includes(s))).toBe(true);

    const sandbox = await sdk.SandboxInstance.get(name);
    expect(sandbox.spec.runtime?.image).toMatch(new RegExp(`^sandbox/${name}:[0-9a-f]{12}$`));
    expect(await run(sandbox, "node -v")).toMatch(/^v20\./);
    expect(await run(sandbox, "cat /app/server.js")).toContain("hello-from-app");
    expect((await run(sandbox, "echo $STAGE")).trim()).toBe("one");
    const events = await eventsOf(name);
    const build = events.filter((e) => e.type === "build").map((e) => e.message ?? "");
    expect(build.some((m) => m.includes("offline stand-in") && m.includes("node:20-slim"))).toBe(true);
    expect(build.some((m) => m.includes("Step 2/"))).toBe(true); // the builder's own lines
    expect(events.map((e) => e.status)).toEqual(expect.arrayContaining(["UPLOADING", "BUILDING", "DEPLOYED"]));
    expect(store.get(`sandbox/${name}:latest`)?.manifest.source).toBe("build");

    const firstBuild = dockerImageId(builderTag(`sandbox/${name}:latest`));
    // A file written now is gone after the rebuild: the sandbox restarts on the new image.
    await sandbox.fs.write("/tmp/before-rebuild", "x");
    const v2 = sdk.ImageInstance.fromRegistry("node:20-slim").workdir("/app").runCommands(`echo '${SERVER}' > server.js`).env({ STAGE: "two" }).expose(8080);
    const rebuilt = await v2.build({ name, memory: 2048, timeout: 900_000 });
    expect(rebuilt.status).toBe("DEPLOYED");
    const again = await sdk.SandboxInstance.get(name);
    expect((await run(again, "echo $STAGE; test -e /tmp/before-rebuild || echo reset")).trim().split("\n")).toEqual(["two", "reset"]);
    const rebuild = (await eventsOf(name)).filter((e) => e.type === "build").map((e) => e.message ?? "");
    expect(rebuild.some((m) => m.includes("Using cache"))).toBe(true);
    // The first build's image is not left dangling in the builder.
    if (firstBuild) expect(dockerImageId(firstBuild)).toBeUndefined();
  }, 900_000);

  it("a build that fails leaves the sandbox FAILED with the build's last lines, and the SDK's build() says so", async () => {
    const name = `sdk-build-fail-${suffix}`;
    names.push(name);
    const image = sdk.ImageInstance.fromRegistry("node:20-slim").runCommands("echo the-step-that-fails && exit 3");
    await expect(image.build({ name, memory: 2048, timeout: 600_000 })).rejects.toThrow(`Deployment failed for sandbox '${name}'`);
    const { data } = await sdk.getSandbox({ path: { sandboxName: name } });
    expect(data?.status).toBe("FAILED");
    const last = ((data?.events ?? []) as SandboxEvent[]).at(-1)!;
    expect(last.status).toBe("FAILED");
    expect(last.message).toContain("build failed");
    expect(last.message).toContain("the-step-that-fails");
    expect(last.message).toMatch(/non-zero code: 3|exit code 3|exit status 3/);
  }, 600_000);

  it("a pinned node:22-alpine@sha256 digest resolves to the Alpine stand-in, whose apk installs known packages and refuses others by name", async () => {
    const name = `sdk-build-apk-${suffix}`;
    names.push(name);
    const image = sdk.ImageInstance.fromRegistry(`node:22-alpine@sha256:${"b".repeat(64)}`)
      .runCommands("apk update")
      .apkAdd("git", "curl", "netcat-openbsd", "bash");
    const built = await image.build({ name, memory: 2048, timeout: 900_000 });
    expect(built.status).toBe("DEPLOYED");
    const sandbox = await sdk.SandboxInstance.get(name);
    expect(await run(sandbox, "node -v")).toMatch(/^v22\./); // the npm registry's official binary
    const seen = await run(sandbox, "git --version; nc -h 2>&1 | head -1; bash -c 'echo bash-ok'; apk add --no-cache no-such-alpine-pkg; echo exit=$?");
    expect(seen).toContain("git version");
    expect(seen).toContain("OpenBSD netcat");
    expect(seen).toContain("bash-ok");
    expect(seen).toContain("no Debian equivalent known for: no-such-alpine-pkg");
    expect(seen).toContain("exit=1");
    const build = (await eventsOf(name)).filter((e) => e.type === "build").map((e) => e.message ?? "");
    expect(build.some((m) => m.includes("tagged node:22-alpine") && m.includes("pinned digest"))).toBe(true);
  }, 900_000);
});
