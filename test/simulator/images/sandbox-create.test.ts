import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ImageStore } from "../../../simulator/images/image-store.js";
import { ProcessLauncher, type LaunchSpec, type Launcher } from "../../../simulator/launcher/index.js";
import { withinCreateWait } from "../../../simulator/sandboxes/agent-runtime.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { writeOciLayout } from "./tar-writer.js";
import { HOST_ROOT } from "../../../simulator/images/sandbox-images.js";

/**
 * Sandboxes made from images, through @blaxel/core: the create resolves
 * spec.runtime.image to the store's root filesystem and hands it to the
 * launcher as LaunchSpec.imageRootDir (recorded here by a launcher wrapping
 * the process launcher); an image no source has fails the create with the
 * platform's INVALID_IMAGE and leaves no sandbox.
 */
type Sdk = typeof import("@blaxel/core");
let sim: ServedSimulator;
let sdk: Sdk;
let store: ImageStore;
const specs: LaunchSpec[] = [];
const WS = "images-ws";

beforeAll(async () => {
  const cache = trackedTempDir("sim-images-");
  store = new ImageStore({ dir: cache, docker: null });
  const layout = (motd: string) => {
    const dir = join(trackedTempDir("layout-"), "oci");
    writeOciLayout(dir, [[{ name: "etc/motd", content: motd }]], {
      config: { Env: ["PATH=/usr/bin:/bin", "FROM_IMAGE=yes", "GREETING=image"], WorkingDir: "/srv" },
    });
    return dir;
  };
  await store.import(layout("one"), "tiny:v1");
  await store.import(layout("two"), "tiny:v2");
  // An image whose entrypoint starts a process beside the agent (as hub images' do): its manifest says so.
  const withService = await store.import(layout("three"), "served:v1");
  const manifestPath = join(withService.rootfs, "..", "manifest.json");
  writeFileSync(
    manifestPath,
    JSON.stringify({ ...JSON.parse(readFileSync(manifestPath, "utf8")), services: [{ name: "image-service", command: "sleep 60", workingDir: "/" }] }),
  );
  const inner = new ProcessLauncher();
  const recording: Launcher = {
    name: "recording",
    usesImageRoot: true,
    start: (spec) => (specs.push(structuredClone(spec)), inner.start(spec)),
    close: () => inner.close?.() ?? Promise.resolve(),
  };
  sim = await serveSimulator({ port: 0, apiKey: "images-admin-key", workspace: WS, logLevel: "silent", imageCache: cache }, { launcher: recording });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

describe("sandbox images through @blaxel/core", () => {
  it("launches the sandbox over its image's root filesystem, with the image's environment under the sandbox's", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "from-tiny", image: "tiny:v1", envs: [{ name: "GREETING", value: "sandbox" }] });
    expect(sandbox.status).toBe("DEPLOYED");
    const spec = specs.find((s) => s.sandbox === "from-tiny")!;
    expect(spec.imageRootDir).toBe(store.get("tiny:v1")!.rootfs);
    expect(spec.env).toMatchObject({ FROM_IMAGE: "yes", GREETING: "sandbox" });
    await sdk.SandboxInstance.delete("from-tiny");
  });

  it("starts the image's own processes through the agent once it is healthy", async () => {
    await sdk.SandboxInstance.create({ name: "served", image: "served:v1" });
    const res = await fetch(`${sim.url}/sbx/${WS}/served/process`, { headers: { authorization: "Bearer images-admin-key", "x-blaxel-workspace": WS } });
    const processes = (await res.json()) as { name: string; status: string; command: string }[];
    expect(processes).toContainEqual(expect.objectContaining({ name: "image-service", command: "sleep 60", status: "running" }));
    const kill = await fetch(`${sim.url}/sbx/${WS}/served/process/image-service/kill`, {
      method: "DELETE",
      headers: { authorization: "Bearer images-admin-key", "x-blaxel-workspace": WS },
    });
    expect(kill.status).toBe(200);
    await sdk.SandboxInstance.delete("served");
  });

  it("fails the create of an image no source has with 400 INVALID_IMAGE, and no sandbox is left behind", async () => {
    const failure = await sdk.SandboxInstance.create({ name: "no-such-image", image: "nobody/nothing:1" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toMatchObject({ code: "INVALID_IMAGE", status_code: 400, sandbox_name: "no-such-image", details: { requested_image: "nobody/nothing:1" } });
    expect((failure as { details: { supported_images: string[] } }).details.supported_images).toEqual(
      expect.arrayContaining(["blaxel/base-image:latest", "tiny:v1"]),
    );
    expect((failure as { message: string }).message).toMatch(/not found/);
    const listed = (await (
      await fetch(`${sim.url}/v0/sandboxes`, { headers: { authorization: "Bearer images-admin-key", "x-blaxel-workspace": WS } })
    ).json()) as { metadata: { name: string } }[];
    expect(listed.map((s) => s.metadata.name)).not.toContain("no-such-image");
    await expect(sdk.SandboxInstance.get("no-such-image")).rejects.toMatchObject({ code: 404 });
    expect(sim.agents.get(WS, "no-such-image")).toBeUndefined();
    expect(specs.some((s) => s.sandbox === "no-such-image")).toBe(false);
    // A hub image under a tag the hub never published is no image either (the SDK's image test uses this one).
    const badTag = await sdk.SandboxInstance.create({ name: "bad-tag", image: "blaxel/base-image:notexistingtag" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(badTag).toMatchObject({ code: "INVALID_IMAGE", status_code: 400, details: { requested_image: "blaxel/base-image:notexistingtag" } });
    expect((badTag as { message: string }).message).toMatch(/not as "notexistingtag"/);
    await expect(sdk.SandboxInstance.get("bad-tag")).rejects.toMatchObject({ code: 404 });
    // A malformed name is an invalid image too.
    await expect(sdk.SandboxInstance.create({ name: "bad-name", image: "Not A Name" })).rejects.toMatchObject({ code: "INVALID_IMAGE" });
  });

  it("an update to another image restarts the sandbox on it; an update to an unknown image is refused and changes nothing", async () => {
    await sdk.SandboxInstance.create({ name: "switcher", image: "tiny:v1" });
    const headers = { authorization: "Bearer images-admin-key", "x-blaxel-workspace": WS, "content-type": "application/json" };
    const url = `${sim.url}/v0/sandboxes/switcher`;
    const current = (await (await fetch(url, { headers })).json()) as { spec: { runtime: Record<string, unknown> } };
    const put = (image: string) =>
      fetch(url, {
        method: "PUT",
        headers,
        body: JSON.stringify({ metadata: { name: "switcher" }, spec: { ...current.spec, runtime: { ...current.spec.runtime, image } } }),
      });
    const refused = await put("nobody/nothing:2");
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ code: 400, message: expect.stringContaining("INVALID_IMAGE") });
    expect(((await (await fetch(url, { headers })).json()) as { spec: { runtime: { image: string } } }).spec.runtime.image).toBe("tiny:v1");

    const switched = await put("tiny:v2");
    expect(switched.status).toBe(200);
    expect(((await switched.json()) as { status: string }).status).toBe("DEPLOYED");
    const launches = specs.filter((s) => s.sandbox === "switcher");
    expect(store.get("tiny:v1")!.rootfs).not.toBe(store.get("tiny:v2")!.rootfs);
    expect(launches.map((s) => s.imageRootDir)).toEqual([store.get("tiny:v1")!.rootfs, store.get("tiny:v2")!.rootfs]);
    await sdk.SandboxInstance.delete("switcher");
  });
});

describe("the Images API shows the images users brought into the store", () => {
  it("lists an imported image as the workspace's sandbox image with its tags and real sizes", async () => {
    const headers = { authorization: "Bearer images-admin-key", "x-blaxel-workspace": WS };
    const listed = (await (await fetch(`${sim.url}/v0/images`, { headers })).json()) as {
      metadata: { name: string; resourceType: string };
      spec: { size: number; tags: { name: string; size: number }[] };
    }[];
    const tiny = listed.find((i) => i.metadata.name === "tiny")!;
    expect(tiny.metadata.resourceType).toBe("sandboxes");
    expect(tiny.spec.tags.map((t) => t.name).sort()).toEqual(["v1", "v2"]);
    expect(tiny.spec.tags[0]!.size).toBe(store.get(`tiny:${tiny.spec.tags[0]!.name}`)!.manifest.size);
    expect(listed.some((i) => i.metadata.name === "base-image")).toBe(false); // hub images are the platform's, not the workspace's
    const one = await fetch(`${sim.url}/v0/images/sandboxes/tiny`, { headers });
    expect(one.status).toBe(200);
    expect(((await one.json()) as { spec: { tags: unknown[] } }).spec.tags).toHaveLength(2);
    expect((await fetch(`${sim.url}/v0/images/agents/tiny`, { headers })).status).toBe(404);
  });
});

describe("--image-source host", () => {
  it("keeps today's behaviour: no image is checked or resolved", async () => {
    const host = await serveSimulator({ port: 0, apiKey: "images-host-key", workspace: "host-ws", logLevel: "silent", imageSource: "host" });
    try {
      expect(host.deps.images).toBe(HOST_ROOT); // the null object: no store, nothing checked or built
      const res = await fetch(`${host.url}/v0/sandboxes`, {
        method: "POST",
        headers: { authorization: "Bearer images-host-key", "x-blaxel-workspace": "host-ws", "content-type": "application/json" },
        body: JSON.stringify({ metadata: { name: "anything" }, spec: { runtime: { image: "nobody/nothing:1" } } }),
      });
      expect(res.status).toBe(200);
    } finally {
      await host.stop();
    }
  });
});

describe("a create that waits for an image build", () => {
  it("answers 504 (the SDK then polls the sandbox) when the build outlasts the wait, and passes a quicker create through", async () => {
    await expect(withinCreateWait(new Promise(() => {}), "slow", 5)).rejects.toMatchObject({ status: 504, details: { code: "GATEWAY_TIMEOUT" } });
    await expect(withinCreateWait(Promise.resolve("done"), "quick", 60_000)).resolves.toBe("done");
  });
});
