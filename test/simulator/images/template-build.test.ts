import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { findBuilder } from "../../../simulator/images/builders.js";
import { builderTag } from "../../../simulator/images/template-build.js";
import { imagesCli } from "../../../simulator/images/cli.js";
import { externalImages } from "../../../simulator/images/dockerfile-refs.js";
import { entrypointService } from "../../../simulator/images/entrypoint.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { isolationUnavailable, pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * Custom templates (`sandbox-sim images build <name> --file <Dockerfile> <context>`)
 * with the real builder (docker build where a daemon answers, else buildah),
 * and a sandbox made from one under the default isolating launcher through
 * @blaxel/core: the platform's template convention (COPY --from=ghcr.io/blaxel-ai/sandbox,
 * an entrypoint that starts sandbox-api, waits for 8080 and POSTs a process)
 * runs unchanged.
 */

const found = await findBuilder();
const builderSkip = found.builder ? "" : ` (skipped: no image builder here: ${found.unavailable.join("; ")})`;
/** Each builder that answers here (docker where a daemon runs, buildah where it works): bad input is checked with both. */
const builders = [found.builder?.kind, ...(found.builder?.kind === "docker" && (await findBuilder(null)).builder ? ["buildah"] : [])].filter((b): b is string =>
  Boolean(b),
);

/** Runs the CLI; returns its exit code and what it wrote. */
async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const sink = (write: (s: string) => void) => ({ write: (chunk: string | Uint8Array) => (write(String(chunk)), true) }) as unknown as NodeJS.WritableStream;
  const code = await imagesCli(
    argv,
    process.env,
    sink((s) => (out += s)),
    sink((s) => (err += s)),
  );
  return { code, out, err };
}

function context(files: Record<string, string>): string {
  const dir = trackedTempDir("template-ctx-");
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text, { mode: 0o755 });
  return dir;
}

describe("the images a Dockerfile names outside itself", () => {
  it("finds FROM and COPY --from images, skipping stages and scratch, with ARG defaults and build args substituted", () => {
    const text = [
      "# syntax=docker/dockerfile:1",
      "ARG SANDBOX_VERSION=latest",
      "FROM ghcr.io/blaxel-ai/sandbox:${SANDBOX_VERSION} AS sandbox-api",
      "FROM --platform=linux/amd64 blaxel/base-image AS build",
      "RUN echo \\",
      "  continued",
      "FROM scratch",
      "COPY --from=build /x /x",
      "COPY --from=sandbox-api /sandbox-api /usr/local/bin/sandbox-api",
      "COPY --chown=0:0 --from=my/tools:v2 /t /t",
    ].join("\n");
    expect(externalImages(text)).toEqual(["ghcr.io/blaxel-ai/sandbox:latest", "blaxel/base-image", "my/tools:v2"]);
    expect(externalImages(text, ["SANDBOX_VERSION=v0.1.2"])[0]).toBe("ghcr.io/blaxel-ai/sandbox:v0.1.2");
  });

  it("runs ENTRYPOINT then CMD as one exec'd command, each word quoted for sh", () => {
    expect(entrypointService({ env: [], workingDir: "/app", entrypoint: ["/entrypoint.sh"], cmd: ["--name", "it's"], user: "" })).toEqual({
      name: "entrypoint",
      command: "exec /entrypoint.sh --name 'it'\\''s'",
      workingDir: "/app",
    });
    expect(entrypointService({ env: [], workingDir: "", entrypoint: [], cmd: [], user: "" })).toBeUndefined();
  });
});

describe.skipIf(builderSkip !== "").each(builders.length ? builders : ["none"])(
  `bad templates built with %s: a clear error and nothing half-built in the store${builderSkip}`,
  (builder) => {
    const cache = trackedTempDir("template-bad-");
    const leftovers = () => ({ refs: readdirSync(join(cache, "refs")), images: readdirSync(join(cache, "images")), tmp: readdirSync(join(cache, "tmp")) });

    it("an unknown base image: says which, and how to provide it", async () => {
      const dir = context({ Dockerfile: "FROM sandbox-kit-test/no-such-base:v9\nRUN true\n" });
      const r = await cli(["build", "bad-base:v1", "--file", join(dir, "Dockerfile"), dir, "--image-cache", cache, "--builder", builder]);
      expect(r.code).toBe(1);
      expect(r.err).toContain('base image "sandbox-kit-test/no-such-base:v9" not found');
      expect(r.err).toContain("sandbox-sim images import <oci-dir-or-tar> --name sandbox-kit-test/no-such-base:v9");
      expect(leftovers()).toEqual({ refs: [], images: [], tmp: [] });
    }, 120_000);

    it("a Dockerfile syntax error: the builder's own message", async () => {
      const dir = context({ Dockerfile: "FROM scratch\nFROBNICATE the-image\n" });
      const r = await cli(["build", "bad-syntax:v1", "--file", join(dir, "Dockerfile"), dir, "--image-cache", cache, "--builder", builder]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/failed/);
      expect(r.err.toLowerCase()).toContain("frobnicate");
      expect(leftovers()).toEqual({ refs: [], images: [], tmp: [] });
    }, 120_000);

    it("a context directory that does not exist", async () => {
      const missing = join(trackedTempDir("template-gone-"), "nope");
      const r = await cli(["build", "bad-context:v1", "--file", join(missing, "Dockerfile"), missing, "--image-cache", cache]);
      expect(r.code).toBe(1);
      expect(r.err).toContain(`the build context ${missing} is not a directory`);
      expect(leftovers()).toEqual({ refs: [], images: [], tmp: [] });
    });

    it("a name a hub image already has, with or without blaxel/", async () => {
      const dir = context({ Dockerfile: "FROM scratch\n" });
      for (const name of ["blaxel/base-image:latest", "nextjs"]) {
        const r = await cli(["build", name, "--file", join(dir, "Dockerfile"), dir, "--image-cache", cache]);
        expect(r.code).toBe(1);
        expect(r.err).toContain("is the hub image blaxel/");
      }
      expect(leftovers()).toEqual({ refs: [], images: [], tmp: [] });
    });
  },
);

// The platform's template convention on the hub's base image: built in the shared per-user store (where the base
// image is), removed again at the end.
const hubStore = new ImageStore({ dir: defaultImageCacheDir() });
const baseReady = (await hubStore.locate("blaxel/base-image").catch(() => undefined))?.kind === "stored";
const e2eSkip =
  builderSkip ||
  (isolationUnavailable ? ` (skipped: ${isolationUnavailable})` : "") ||
  (baseReady || process.env.SANDBOX_KIT_HUB_IMAGE_TEST
    ? ""
    : " (skipped: blaxel/base-image is not built in the per-user store; build it ahead: sandbox-sim images build blaxel/base-image, or run with SANDBOX_KIT_HUB_IMAGE_TEST=1)");
const overBaseSkip =
  builderSkip ||
  (found.builder?.kind !== "docker" ? " (skipped: only a Docker builder's layers are read over the base; buildah exports the whole image)" : "") ||
  (baseReady || process.env.SANDBOX_KIT_HUB_IMAGE_TEST
    ? ""
    : " (skipped: blaxel/base-image is not built in the per-user store; build it ahead: sandbox-sim images build blaxel/base-image, or run with SANDBOX_KIT_HUB_IMAGE_TEST=1)");

/** What a process sees of an image's layers (top first) stacked the way the launcher stacks them: overlayfs in a user namespace. */
function overlayView(layers: string[], script: string): string {
  const mountAt = trackedTempDir("template-view-");
  return execFileSync(
    "unshare",
    [
      "--user",
      "--map-root-user",
      "--mount",
      "sh",
      "-c",
      `mount -t overlay overlay -o "lowerdir=$1,userxattr" "$2" && cd "$2" && ${script}`,
      "view",
      layers.join(":"),
      mountAt,
    ],
    { encoding: "utf8" },
  );
}

describe.skipIf(overBaseSkip !== "")(`a template stored as its own layer stacked over its base${overBaseSkip}`, () => {
  const NAME = "sandbox-kit-test/template-over-base:v1";
  const CHILD = "sandbox-kit-test/template-over-template:v1";
  afterAll(async () => {
    hubStore.remove(CHILD);
    hubStore.remove(NAME);
    for (const name of [CHILD, NAME]) await found.builder?.remove(builderTag(name));
    await found.builder?.remove(NAME); // the template given to the builder as the child's FROM
  }, 120_000);
  const facts = (rootfs: string, path: string) => {
    const st = lstatSync(join(rootfs, path));
    return { content: readFileSync(join(rootfs, path), "utf8"), ino: st.ino, mode: st.mode };
  };

  it("holds only what the build changed (deletions as whiteouts); stacked over the base it shows changes, deletions and a recreated directory; the base is untouched and kept while the template needs it", async () => {
    const base = await hubStore.ensure("blaxel/base-image");
    const files = ["etc/debian_version", "etc/issue", "etc/issue.net", "etc/host.conf"];
    const before = Object.fromEntries(files.map((f) => [f, facts(base.rootfs, f)]));
    const aptBefore = readdirSync(join(base.rootfs, "etc/apt")).sort();
    const dir = context({
      Dockerfile: [
        "FROM blaxel/base-image",
        // rm -rf then mkdir of a directory the base has: Docker stores it as an opaque directory (an overlay whiteout).
        "RUN echo template > /etc/debian_version && rm /etc/issue && chmod 600 /etc/issue.net && rm -rf /etc/apt && mkdir /etc/apt && echo own > /etc/apt/only-this",
      ].join("\n"),
    });
    const built = await cli(["build", NAME, "--file", join(dir, "Dockerfile"), dir]);
    expect(built.code, built.err).toBe(0);
    expect(built.err).toContain("1 new layer over blaxel/base-image");
    const template = hubStore.get(NAME)!;
    expect(template.manifest.base).toBe(base.manifest.digest);
    expect(template.layers).toEqual([template.rootfs, ...base.layers]);

    // Its own layer: the changes only, nothing of the base copied or linked.
    expect(readFileSync(join(template.rootfs, "etc/debian_version"), "utf8")).toBe("template\n");
    expect(existsSync(join(template.rootfs, "etc/host.conf"))).toBe(false);
    const whiteout = (path: string) => {
      const st = lstatSync(join(template.rootfs, path));
      return st.isCharacterDevice() && st.rdev === 0;
    };
    expect(whiteout("etc/issue")).toBe(true);
    // The recreated directory: a whiteout of each name the base has there, beside its own file.
    expect(readdirSync(join(template.rootfs, "etc/apt")).sort()).toEqual([...new Set([...aptBefore, "only-this"])].sort());
    for (const name of aptBefore.filter((n) => n !== "only-this")) expect(whiteout(`etc/apt/${name}`), name).toBe(true);

    // Stacked as a sandbox's overlay stacks it.
    const seen = overlayView(
      template.layers,
      "cat etc/debian_version; cat etc/host.conf | head -c 0; test -e etc/issue && echo issue-there; stat -c %a etc/issue.net; ls -A etc/apt; test -f bin/sh && echo has-sh",
    );
    expect(seen.split("\n").filter(Boolean)).toEqual(["template", "600", "only-this", "has-sh"]);

    // A template over that template: the builder gets it as one tree (base-copy.ts materialise), the result stacks on both.
    const childDir = context({ Dockerfile: [`FROM ${NAME}`, "RUN test ! -e /etc/issue && ls /etc/apt > /etc/apt-seen && rm /etc/issue.net"].join("\n") });
    const child = await cli(["build", CHILD, "--file", join(childDir, "Dockerfile"), childDir]);
    expect(child.code, child.err).toBe(0);
    const stacked = hubStore.get(CHILD)!;
    expect(stacked.layers).toEqual([stacked.rootfs, ...template.layers]);
    expect(
      overlayView(stacked.layers, "cat etc/apt-seen; cat etc/debian_version; test -e etc/issue.net || echo no-issue-net").split("\n").filter(Boolean),
    ).toEqual(["only-this", "template", "no-issue-net"]);

    const after = () => Object.fromEntries(files.map((f) => [f, facts(base.rootfs, f)]));
    expect(after()).toEqual(before);
    expect(readdirSync(join(base.rootfs, "etc/apt")).sort()).toEqual(aptBefore);

    // Removing the images in either order leaves the base: it is a name's image of its own.
    expect(hubStore.remove(NAME)).toBe(true);
    expect(existsSync(template.rootfs)).toBe(true); // the child is stacked on it
    expect(hubStore.get(CHILD)?.layers).toEqual(stacked.layers);
    expect(hubStore.remove(CHILD)).toBe(true);
    expect(existsSync(stacked.rootfs)).toBe(false);
    expect(existsSync(template.rootfs)).toBe(false); // nothing needs it any more
    expect(hubStore.get("blaxel/base-image")?.rootfs).toBe(base.rootfs);
    expect(after()).toEqual(before);
    expect(readdirSync(join(hubStore.dir, "tmp")).filter((f) => f.includes(`-${process.pid}-`))).toEqual([]);
  }, 600_000); // the base is built first where it is not yet (SANDBOX_KIT_HUB_IMAGE_TEST)
});

const TEMPLATE = "sandbox-kit-test/template-e2e:v1";
const MARKER = "424242"; // the sleep the entrypoint starts: found by pid on the host

const ENTRYPOINT = `#!/bin/sh
/usr/local/bin/sandbox-api &
count=0
while ! nc -z localhost 8080; do
  sleep 1; count=$((count + 1))
  if [ $count -gt 30 ]; then echo "Timeout waiting for port 8080"; exit 1; fi
done
echo "Port 8080 is now available"
curl -s http://localhost:8080/process -X POST -H "Content-Type: application/json" \\
  -d '{"name": "template-sleeper", "command": "sleep ${MARKER}", "waitForCompletion": false}'
wait
`;

describe.skipIf(e2eSkip !== "")(`a template from a Dockerfile, used by name in SandboxInstance.create${e2eSkip}`, () => {
  let sim: ServedSimulator | undefined;
  afterAll(async () => {
    await sim?.stop();
    hubStore.remove(TEMPLATE); // its root filesystem is the base image's size: removing it takes a while on a busy machine
    await found.builder?.remove(builderTag(TEMPLATE));
  }, 180_000);

  it("builds FROM blaxel/base-image with RUN, ENV and the sandbox-api convention; the entrypoint's process is the sandbox's", async () => {
    const dir = context({
      Dockerfile: [
        "FROM blaxel/base-image",
        "RUN echo built-by-run > /opt/run-marker.txt",
        // A deletion and a directory made anew over the base's (stored as overlay whiteouts over the base, base-copy.ts).
        "RUN rm /etc/issue && rm -rf /etc/apt/apt.conf.d && mkdir /etc/apt/apt.conf.d && echo own > /etc/apt/apt.conf.d/only-this",
        "ENV TEMPLATE_GREETING=hello-from-env",
        "COPY --from=ghcr.io/blaxel-ai/sandbox:latest /sandbox-api /usr/local/bin/sandbox-api",
        "COPY entrypoint.sh /entrypoint.sh",
        "RUN chmod +x /entrypoint.sh",
        'ENTRYPOINT ["/entrypoint.sh"]',
      ].join("\n"),
      "entrypoint.sh": ENTRYPOINT,
    });
    const built = await cli(["build", TEMPLATE, "--file", join(dir, "Dockerfile"), dir]);
    expect(built.code, built.err).toBe(0);
    expect(built.err).toContain("RUN echo built-by-run"); // the builder's progress
    expect(hubStore.get(TEMPLATE)?.manifest).toMatchObject({ source: "build", config: { entrypoint: ["/entrypoint.sh"] } });

    sim = await serveSimulator({ port: 0, apiKey: "template-e2e-key", workspace: "templates", logLevel: "silent", imageCache: defaultImageCacheDir() });
    const sdk = await sdkForSimulator(sim.env);
    const sandbox = await sdk.SandboxInstance.create({ name: "from-template", image: TEMPLATE });
    expect(sandbox.status).toBe("DEPLOYED");
    expect(await sandbox.fs.read("/opt/run-marker.txt")).toBe("built-by-run\n");
    const env = await sandbox.process.exec({ command: "echo $TEMPLATE_GREETING", waitForCompletion: true });
    expect(env.logs?.trim()).toBe("hello-from-env");
    // The template's layer over the base's files; the sandbox's writes and deletions go to its own layer only.
    const base = hubStore.get("blaxel/base-image")!;
    expect(hubStore.get(TEMPLATE)?.layers.slice(1)).toEqual(found.builder?.kind === "docker" && process.getuid?.() === 0 ? base.layers : []);
    const baseHostConf = readFileSync(join(base.rootfs, "etc/host.conf"), "utf8");
    const seen = await sandbox.process.exec({
      command:
        "test -e /etc/issue || echo issue-gone; ls -A /etc/apt/apt.conf.d; test -s /etc/host.conf && echo host-conf; echo mine > /etc/host.conf; rm /etc/debian_version; cat /etc/host.conf; test -e /etc/debian_version || echo version-gone",
      waitForCompletion: true,
    });
    expect(seen.logs?.split("\n").filter(Boolean)).toEqual(["issue-gone", "only-this", "host-conf", "mine", "version-gone"]);
    expect(readFileSync(join(base.rootfs, "etc/host.conf"), "utf8")).toBe(baseHostConf);
    expect(existsSync(join(base.rootfs, "etc/debian_version"))).toBe(true);

    let sleeper: Awaited<ReturnType<typeof sandbox.process.get>> | undefined;
    for (let i = 0; i < 120 && sleeper?.status !== "running"; i++) {
      sleeper = await sandbox.process.get("template-sleeper").catch(() => undefined);
      if (sleeper?.status !== "running") await sleep(250);
    }
    expect(sleeper, `entrypoint's logs: ${await sandbox.process.logs("entrypoint").catch((e: Error) => e.message)}`).toMatchObject({
      name: "template-sleeper",
      status: "running",
      command: `sleep ${MARKER}`,
    });
    const entrypoint = await sandbox.process.get("entrypoint");
    expect(entrypoint.status).toBe("running"); // its final `wait` holds on the stand-in, as on the platform
    expect(await sandbox.process.logs("entrypoint")).toContain("Port 8080 is now available");
    expect(pidsWithMarker(`sleep ${MARKER}`)).toHaveLength(1);

    await sdk.SandboxInstance.delete("from-template");
    for (let i = 0; i < 40 && (pidsWithMarker(`sleep ${MARKER}`).length > 0 || pidsWithMarker("/usr/local/bin/sandbox-api").length > 0); i++) await sleep(250);
    expect(pidsWithMarker(`sleep ${MARKER}`)).toEqual([]);
    expect(pidsWithMarker("/usr/local/bin/sandbox-api")).toEqual([]);
  }, 600_000);
});
