import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { findBuilder } from "../../../simulator/images/builders.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { builderTag } from "../../../simulator/images/template-build.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * Upstream's application runtime test (IMAGE_BUILD=true, tests/integration/sandbox/applications.test.ts) through
 * @blaxel/core: an image built with ImageInstance (sandbox/<name>:latest), then ApplicationInstance create, get,
 * list, update, revisions (one generated per change of the spec-level compute, newest first), the wait for
 * DEPLOYED, envs, the raw model, delete.
 */

const found = await findBuilder();
const skip =
  (found.builder ? "" : ` (skipped: no image builder here: ${found.unavailable.join("; ")})`) ||
  (isolationUnavailable ? ` (skipped: ${isolationUnavailable})` : "");
const store = new ImageStore({ dir: defaultImageCacheDir() });
const suffix = randomBytes(3).toString("hex");
const SANDBOX = `app-img-build-${suffix}`;
const IMAGE = `sandbox/${SANDBOX}:latest`;

describe.skipIf(skip !== "")(`applications from an image built through the SDK${skip}`, () => {
  let sim: ServedSimulator;
  let sdk: Awaited<ReturnType<typeof sdkForSimulator>>;
  const apps: string[] = [];
  beforeAll(async () => {
    sim = await serveSimulator({ port: 0, apiKey: "applications-key", workspace: "applications", logLevel: "silent", imageCache: defaultImageCacheDir() });
    sdk = await sdkForSimulator(sim.env);
  });
  afterAll(async () => {
    for (const name of apps) await sdk.ApplicationInstance.delete(name).catch(() => undefined);
    await sdk.SandboxInstance.delete(SANDBOX).catch(() => undefined);
    await sim?.stop();
    for (const image of store.list().filter((i) => i.ref.startsWith(`sandbox/${SANDBOX}:`))) store.remove(image.ref);
    await found.builder?.remove(builderTag(IMAGE));
  }, 180_000);

  it("builds the image, then creates, reads, lists, updates and deletes applications of it, with revisions and the wait for DEPLOYED", async () => {
    const image = sdk.ImageInstance.fromRegistry("node:20-slim")
      .workdir("/app")
      .runCommands(`echo 'require("http").createServer((q, s) => s.end("hello-from-app")).listen(8080)' > server.js`)
      .expose(8080);
    const sandbox = await image.build({ name: SANDBOX, memory: 2048, timeout: 900_000 });
    expect(sandbox.status).toBe("DEPLOYED");
    expect(store.get(IMAGE)?.manifest.source).toBe("build");

    const name = `app-crud-${suffix}`;
    apps.push(name);
    const app = await sdk.ApplicationInstance.create({ name, image: IMAGE, memory: 2048, region: "us-pdx-1", labels: { env: "test" } });
    expect(app.name).toBe(name);
    expect(app.spec?.revisions?.[0]?.image).toBe(IMAGE);
    expect(app.spec?.revisions?.[0]?.memory).toBe(2048);
    expect(app.spec?.region).toBe("us-pdx-1");
    const first = app.spec?.revisions?.[0]?.id;
    expect(app.spec?.revision?.active).toBe(first);

    const got = await sdk.ApplicationInstance.get(name);
    expect(got.metadata.name).toBe(name);
    expect((await sdk.ApplicationInstance.list()).find((a) => a.name === name)).toBeDefined();

    const updated = await sdk.ApplicationInstance.update(name, { memory: 4096, image: IMAGE });
    expect(updated.spec?.revisions?.[0]?.memory).toBe(4096);
    expect(updated.spec?.revisions?.map((r) => r.memory)).toEqual([4096, 2048]);
    expect(updated.spec?.revision?.active).toBe(updated.spec?.revisions?.[0]?.id);
    // The same compute again: no new revision.
    const same = await sdk.ApplicationInstance.update(name, { labels: { env: "test", more: "yes" } });
    expect(same.spec?.revisions).toHaveLength(2);

    const revisions = await (await sdk.ApplicationInstance.get(name)).listRevisions();
    expect(Array.isArray(revisions)).toBe(true);
    expect(revisions.map((r) => r.image)).toEqual([IMAGE, IMAGE]);
    expect(revisions[1]?.id).toBe(first);

    let status: string | undefined;
    for (let i = 0; i < 60 && status !== "DEPLOYED"; i++) {
      status = (await sdk.ApplicationInstance.get(name)).status;
      if (status !== "DEPLOYED") await sleep(1000);
    }
    expect(status).toBe("DEPLOYED");

    const withEnvs = `app-envs-${suffix}`;
    apps.push(withEnvs);
    const envApp = await sdk.ApplicationInstance.create({
      name: withEnvs,
      image: IMAGE,
      memory: 2048,
      envs: [
        { name: "NODE_ENV", value: "production" },
        { name: "PORT", value: "8080" },
      ],
    });
    expect(envApp.spec?.revisions?.[0]?.envs?.length).toBe(2);

    const raw = `app-raw-${suffix}`;
    apps.push(raw);
    const rawApp = await sdk.ApplicationInstance.create({
      metadata: { name: raw, displayName: "Raw App Test" },
      spec: { enabled: true, region: "us-pdx-1", revisions: [{ image: IMAGE, memory: 2048 }] },
    } as Parameters<typeof sdk.ApplicationInstance.create>[0]);
    expect(rawApp.name).toBe(raw);
    expect(rawApp.metadata.displayName).toBe("Raw App Test");
    expect(rawApp.spec?.revisions?.[0]).toMatchObject({ image: IMAGE, memory: 2048 });
    expect(rawApp.spec?.revisions?.[0]?.id).toMatch(/^rev-/);

    expect(await sdk.ApplicationInstance.delete(raw)).toBeDefined();
    apps.pop();
    await sleep(500);
    const gone = await sdk.ApplicationInstance.get(raw).then(
      (a) => a.status,
      () => "404",
    );
    expect(["DELETING", "TERMINATED", "404"]).toContain(gone);

    await expect(sdk.ApplicationInstance.create({ name: `app-noimage-${suffix}`, memory: 2048 })).rejects.toThrow(/spec.image/);
  }, 900_000);
});
