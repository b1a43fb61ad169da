import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { deflateRawSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { findBuilder } from "../../../simulator/images/builders.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { builderTag } from "../../../simulator/images/template-build.js";
import { isolationUnavailable, pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { spawnSimulatorProcess } from "../../helpers/simulator.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * `bl push` of a source build, through HTTP as the CLI sends it (blaxel-ai/toolkit cli/push.go):
 * POST /v0/images?upload=true answers X-Blaxel-Upload-Url, the zip is PUT there (application/zip, 200), and
 * GET /v0/images/sandbox/{name} reads UPLOADING/BUILDING until BUILT (or FAILED, the reason in the newest
 * ai.blaxel.controlplane.buildimage.* event); the image is then in GET /v0/images and a sandbox runs it.
 * Then a simulator killed in the middle of an upload's build: after its restart (same --data) the sandbox and
 * the pushed image are FAILED, their events saying the build was interrupted.
 */

const found = await findBuilder();
const skip =
  (found.builder ? "" : ` (skipped: no image builder here: ${found.unavailable.join("; ")})`) ||
  (isolationUnavailable ? ` (skipped: ${isolationUnavailable})` : "");
const store = new ImageStore({ dir: defaultImageCacheDir() });
const suffix = randomBytes(3).toString("hex");
const KEY = "image-push-key";
const WS = "image-push";

/** A zip of stored (not deflated) or deflated files, as the CLI's archiver writes one. */
function zipOf(files: Record<string, string>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [file, text] of Object.entries(files)) {
    const raw = Buffer.from(text);
    const body = deflateRawSync(raw);
    const name = Buffer.from(file);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(raw.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(raw.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE((0o100644 << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += 30 + name.length + body.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(centrals.length / 2, 8);
  end.writeUInt16LE(centrals.length / 2, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

interface ImageEvent {
  type: string;
  status: string;
  message: string;
}
interface ImageReply {
  metadata: { name: string; status: string; events: ImageEvent[] };
  spec: { size: number; tags: { name: string; size: number }[] };
}

describe.skipIf(skip !== "")(`bl push of an image, and a restart in the middle of a build${skip}`, () => {
  const children: ChildProcess[] = [];
  const images: string[] = [];
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    // The build the killed simulator left: its docker CLI (named by the template's tag) is ended by pid.
    for (const pid of pidsWithMarker(`interrupted-${suffix}`)) process.kill(pid, "SIGKILL");
    for (const name of images) {
      for (const image of store.list().filter((i) => i.ref.startsWith(`${name.split(":")[0]}:`))) store.remove(image.ref);
      await found.builder?.remove(builderTag(name));
    }
  }, 120_000);

  async function start(data: string) {
    const { child, url } = await spawnSimulatorProcess(
      ["--data", data, "--api-key", KEY, "--workspace", WS, "--log-level", "silent", "--prebuild", "none", "--warm-sandboxes", "0"],
      { track: children },
    );
    const api = (path: string, init: RequestInit = {}) =>
      fetch(`${url}/v0${path}`, {
        ...init,
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json", ...init.headers },
      });
    return { child, url, api };
  }

  /** What `bl push` does up to the upload: POST /images?upload=true, then the PUT of the zip. */
  async function push(api: Awaited<ReturnType<typeof start>>["api"], name: string, dockerfile: string): Promise<void> {
    const requested = await api("/images?upload=true", { method: "POST", body: JSON.stringify({ name, resourceType: "sandbox", labels: { memory: "2048" } }) });
    expect(requested.status).toBe(200);
    const uploadUrl = requested.headers.get("x-blaxel-upload-url")!;
    expect(uploadUrl).toMatch(/^http:\/\/.*\/uploads\//);
    expect(((await (await api(`/images/sandbox/${name}`)).json()) as ImageReply).metadata.status).toBe("UPLOADING");
    const uploaded = await fetch(uploadUrl, {
      method: "PUT",
      headers: { "content-type": "application/zip" },
      body: new Uint8Array(zipOf({ Dockerfile: dockerfile })),
    });
    expect(uploaded.status).toBe(200);
  }

  /** The CLI's wait (getImageBuildStatus): GET /images/{type}/{name} until BUILT or FAILED. */
  async function built(api: Awaited<ReturnType<typeof start>>["api"], name: string): Promise<ImageReply> {
    for (;;) {
      const image = (await (await api(`/images/sandbox/${name}`)).json()) as ImageReply;
      if (image.metadata.status === "BUILT" || image.metadata.status === "FAILED") return image;
      await sleep(1000);
    }
  }

  it("builds a pushed context into sandbox/<name>:latest, listed by GET /images and run by a sandbox; a failing build is FAILED with its lines", async () => {
    const sim = await start(join(trackedTempDir("image-push-"), "sim.db"));
    const name = `pushed-${suffix}`;
    images.push(`sandbox/${name}:latest`);
    await push(sim.api, name, `FROM node:20-slim\nRUN echo pushed-${suffix} > /pushed.txt\n`);
    const image = await built(sim.api, name);
    expect(image.metadata.status).toBe("BUILT");
    expect(image.metadata.events.at(-1)).toMatchObject({ type: "ai.blaxel.controlplane.buildimage.succeeded", status: "BUILT" });
    expect(image.metadata.events.some((e) => e.type === "ai.blaxel.controlplane.buildimage.log" && e.message.includes("Step 2/"))).toBe(true);
    expect(image.spec.tags).toEqual([expect.objectContaining({ name: "latest" })]);
    expect(image.spec.tags[0]!.size).toBeGreaterThan(0);
    // What the CLI's build log watcher prints meanwhile (GET /observability/logs): the build's lines.
    const window = `start=${new Date(Date.now() - 600_000).toISOString().slice(0, 19)}&end=${new Date(Date.now() + 3_600_000).toISOString().slice(0, 19)}`;
    const logs = (await (await sim.api(`/observability/logs?${window}&resourceType=sandboxes&workloadIds=${name}&limit=1000&offset=0`)).json()) as Record<
      string,
      { logs: { message: string }[] }
    >;
    expect(logs[name]!.logs.some((l) => l.message.includes("Step 2/"))).toBe(true);
    const listed = (await (await sim.api("/images")).json()) as ImageReply[];
    expect(listed.find((i) => i.metadata.name === name)?.metadata.status).toBe("BUILT");

    // A sandbox of it, as the CLI's sample says (image: sandbox/<name>:latest).
    const sandbox = `runs-pushed-${suffix}`;
    const created = await sim.api("/sandboxes", {
      method: "POST",
      body: JSON.stringify({ metadata: { name: sandbox }, spec: { runtime: { image: `sandbox/${name}:latest`, memory: 2048 } } }),
    });
    expect(created.status).toBe(200);
    const ran = await fetch(`${sim.url}/sbx/${WS}/${sandbox}/process`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ command: "cat /pushed.txt", waitForCompletion: true }),
    });
    expect(((await ran.json()) as { logs: string }).logs.trim()).toBe(`pushed-${suffix}`);
    await sim.api(`/sandboxes/${sandbox}`, { method: "DELETE" });

    const failing = `push-fails-${suffix}`;
    images.push(`sandbox/${failing}:latest`);
    await push(sim.api, failing, `FROM node:20-slim\nRUN echo the-push-step-that-fails && exit 5\n`);
    const failed = await built(sim.api, failing);
    expect(failed.metadata.status).toBe("FAILED");
    const last = failed.metadata.events.at(-1)!;
    expect(last).toMatchObject({ type: "ai.blaxel.controlplane.buildimage.failed", status: "FAILED" });
    expect(last.message).toContain("build failed");
    expect(last.message).toContain("the-push-step-that-fails");

    // Without a body the CLI's request is refused as the platform's would be.
    expect((await sim.api("/images?upload=true", { method: "POST", body: JSON.stringify({ resourceType: "sandbox" }) })).status).toBe(400);
    sim.child.kill("SIGTERM");
    await new Promise((r) => sim.child.once("exit", r));
  }, 900_000);

  it("a simulator restarted in the middle of an upload's build leaves the sandbox and the pushed image FAILED, saying the build was interrupted", async () => {
    const data = join(trackedTempDir("image-push-restart-"), "sim.db");
    const first = await start(data);
    const sandbox = `interrupted-${suffix}`;
    const pushed = `interrupted-${suffix}`;
    images.push(`sandbox/${sandbox}:latest`);
    const slow = `FROM node:20-slim\nRUN echo building-${suffix} && sleep 120\n`;

    // The SDK's flow for a sandbox (ImageInstance.build): POST /sandboxes?upload=true, then the zip.
    const requested = await first.api("/sandboxes?upload=true", {
      method: "POST",
      body: JSON.stringify({ metadata: { name: sandbox }, spec: { runtime: { memory: 2048 } } }),
    });
    expect(requested.status).toBe(200);
    const put = await fetch(requested.headers.get("x-blaxel-upload-url")!, {
      method: "PUT",
      headers: { "content-type": "application/zip" },
      body: new Uint8Array(zipOf({ Dockerfile: slow })),
    });
    expect(put.status).toBe(200);
    // And a `bl push` left UPLOADING (its zip never sent).
    const pushRequest = await first.api("/images?upload=true", { method: "POST", body: JSON.stringify({ name: `${pushed}-img`, resourceType: "sandbox" }) });
    expect(pushRequest.status).toBe(200);
    for (;;) {
      const doc = (await (await first.api(`/sandboxes/${sandbox}`)).json()) as { status: string; events: ImageEvent[] };
      if (doc.status === "BUILDING" && doc.events.some((e) => e.message.includes(`building-${suffix}`))) break;
      expect(doc.status).not.toBe("FAILED");
      await sleep(500);
    }
    first.child.kill("SIGKILL"); // a crash in the middle of the build
    await new Promise((r) => first.child.once("exit", r));

    const second = await start(data);
    const doc = (await (await second.api(`/sandboxes/${sandbox}`)).json()) as { status: string; events: ImageEvent[] };
    expect(doc.status).toBe("FAILED");
    expect(doc.events.at(-1)!.message).toContain("build interrupted");
    const image = (await (await second.api(`/images/sandbox/${pushed}-img`)).json()) as ImageReply;
    expect(image.metadata.status).toBe("FAILED");
    expect(image.metadata.events.at(-1)).toMatchObject({ type: "ai.blaxel.controlplane.buildimage.failed", status: "FAILED" });
    expect(image.metadata.events.at(-1)!.message).toContain("upload interrupted");
    second.child.kill("SIGTERM");
    await new Promise((r) => second.child.once("exit", r));
  }, 600_000);
});
