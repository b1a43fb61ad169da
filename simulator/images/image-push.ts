import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { toIso as iso } from "../../src/clock.js";
import { parse } from "../../src/http.js";
import type { Logger } from "../../src/logging.js";
import type { OpContext } from "../http/operation.js";
import { nameSchema } from "../resources/metadata.js";
import { IMAGE_KIND, SINGULAR, type ImageDoc, type ResourceType } from "./image-doc.js";
import { parseResourceType, recomputeSizes } from "./image-records.js";
import { meterImage } from "./image-usage.js";
import type { ImageStore } from "./image-store.js";
import type { Progress } from "./progress.js";
import { buildTemplate } from "./template-build.js";
import { unzipInto } from "./zip-reader.js";
import type { ImageRecordDeps } from "./image-records.js";

/**
 * `bl push` of a source build (blaxel-ai/toolkit cli/push.go): `POST /images?upload=true` with
 * `{name, resourceType, generation?, labels?}` answers `X-Blaxel-Upload-Url`; the CLI PUTs its zip there
 * (Content-Type application/zip, 200 expected), then polls `GET /images/{resourceType}/{name}` until
 * `metadata.status` is BUILT (or FAILED, the reason in the newest `ai.blaxel.controlplane.buildimage.*` event).
 * The zip is built by the same builder as a sandbox's upload (template-build.ts) into the image store as
 * `<resourceType>/<name>:latest` (`sandbox/<name>:latest` for a sandbox image, what the CLI tells users to
 * create sandboxes from), and the record lists it with its real size.
 */

export const PushBody = z.looseObject({
  name: z.string().min(1),
  resourceType: z.string(),
  generation: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
});

/** The event types the CLI reads a build's outcome from (latestFailureMessage's prefix). */
export const BUILD_EVENT = "ai.blaxel.controlplane.buildimage";
/** Build lines kept among the record's events (the newest). */
const MAX_BUILD_LINES = 200;

export interface ImagePushDeps extends ImageRecordDeps {
  logger?: Logger;
}

/** The image a push builds: `<resourceType>/<name>:latest`, where sandboxes (and the other kinds) find it. */
export const pushedImageName = (type: ResourceType, name: string) => `${SINGULAR[type]}/${name}:latest`;

/** Writes a status (and an event of the build) on the push's record, creating the record on the first. */
export function recordPushStatus(
  deps: ImagePushDeps,
  workspace: string,
  type: ResourceType,
  name: string,
  status: string,
  event: string,
  message: string,
): void {
  recordPushEvents(deps, workspace, type, name, status, [{ event, message }]);
}

function recordPushEvents(
  deps: ImagePushDeps,
  workspace: string,
  type: ResourceType,
  name: string,
  status: string,
  added: { event: string; message: string }[],
): void {
  const now = deps.clock.now();
  const item = deps.resources.get<ImageDoc>(workspace, IMAGE_KIND, name, type);
  const doc: ImageDoc = item?.doc ?? {
    metadata: {
      name,
      displayName: name,
      resourceType: type,
      workspace,
      status,
      events: [],
      createdAt: iso(now),
      updatedAt: iso(now),
      lastDeployedAt: iso(now),
    },
    spec: { size: 0, tags: [] },
    __layerSizes: {},
  };
  doc.metadata.status = status;
  doc.metadata.updatedAt = iso(now);
  const events = [...doc.metadata.events, ...added.map(({ event, message }) => ({ type: `${BUILD_EVENT}.${event}`, status, message, time: iso(now) }))];
  let excess = events.filter((e) => (e as { type: string }).type === `${BUILD_EVENT}.log`).length - MAX_BUILD_LINES;
  doc.metadata.events = excess > 0 ? events.filter((e) => (e as { type: string }).type !== `${BUILD_EVENT}.log` || excess-- <= 0) : events;
  if (item) {
    item.doc = doc;
    item.status = status;
    deps.resources.update(item);
  } else deps.resources.insert({ workspace, kind: IMAGE_KIND, parent: type, name, createdMs: now, status, doc });
}

/**
 * Starts a push: the record reads UPLOADING; returns what the uploaded zip is built by. `key` names the push
 * among uploads (a newer push of the same image supersedes an older one's upload URL).
 */
export function startImagePush(
  deps: ImagePushDeps,
  ctx: OpContext,
  store: ImageStore,
): { key: string; build: (work: string, zip: string, bytes: number) => Promise<void>; reply: Record<string, unknown> } {
  const body = parse(PushBody, ctx.body ?? {}, "body");
  parse(nameSchema, body.name, "body.name");
  const type = parseResourceType(body.resourceType);
  const image = pushedImageName(type, body.name);
  const { workspace } = ctx;
  recordPushStatus(deps, workspace, type, body.name, "UPLOADING", "uploading", "uploading: waiting for the build context at X-Blaxel-Upload-Url");
  const build = async (work: string, zip: string, bytes: number) => {
    // The build's lines, written in batches (an apt-get install says thousands).
    let queued: { event: string; message: string }[] = [];
    const flush = () => {
      if (queued.length > 0) recordPushEvents(deps, workspace, type, body.name, "BUILDING", queued);
      queued = [];
    };
    const timer = setInterval(flush, 500);
    timer.unref();
    const lines = (line: string) => {
      const text = line.trimEnd();
      if (text) queued.push({ event: "log", message: text.slice(0, 2000) });
    };
    const progress: Progress = { phase: lines, note: lines, advance() {} };
    recordPushStatus(deps, workspace, type, body.name, "BUILDING", "started", `building ${image} from the uploaded context (${bytes} bytes)`);
    try {
      const context = join(work, "context");
      mkdirSync(context);
      await unzipInto(zip, context);
      const built = await buildTemplate(store, image, context, { progress });
      clearInterval(timer);
      flush();
      recordPushStatus(deps, workspace, type, body.name, "BUILT", "succeeded", `built ${image} (${built.manifest.digest})`);
      tagBuilt(deps, workspace, type, body.name, built.manifest.digest, built.manifest.size);
    } catch (err) {
      clearInterval(timer);
      flush();
      const message = (err as Error).message;
      deps.logger?.warn({ workspace, image, err: message.split("\n")[0] }, "image push build failed");
      recordPushStatus(deps, workspace, type, body.name, "FAILED", "failed", `build failed: ${message}`);
    }
  };
  return {
    key: `image:${type}/${body.name}`,
    build,
    reply: { name: body.name, resourceType: SINGULAR[type], image, build: true, message: `upload the build context of ${image} to X-Blaxel-Upload-Url` },
  };
}

/** The record's `latest` tag: the built image, its real digest and size. */
function tagBuilt(deps: ImagePushDeps, workspace: string, type: ResourceType, name: string, digest: string, size: number): void {
  const item = deps.resources.get<ImageDoc>(workspace, IMAGE_KIND, name, type);
  if (!item) return;
  const now = iso(deps.clock.now());
  const doc = item.doc;
  doc.__layerSizes[digest] = size;
  const tag = doc.spec.tags.find((t) => t.name === "latest");
  if (tag) Object.assign(tag, { updatedAt: now, __layers: [digest] });
  else doc.spec.tags.push({ name: "latest", size, createdAt: now, updatedAt: now, __layers: [digest] });
  doc.metadata.lastDeployedAt = now;
  recomputeSizes(doc);
  deps.resources.update(item);
  meterImage(deps, item);
}

/** A restart: pushes the previous run was uploading or building are FAILED, saying why (their builder and URL are gone). */
export function failInterruptedPushes(deps: ImagePushDeps, workspaces: string[]): void {
  for (const workspace of workspaces) {
    for (const item of deps.resources.allOfKind<ImageDoc>(workspace, [IMAGE_KIND])) {
      const status = item.doc.metadata.status;
      if (status !== "UPLOADING" && status !== "BUILDING") continue;
      const why =
        status === "UPLOADING"
          ? "upload interrupted: the simulator restarted before the build context was uploaded"
          : "build interrupted: the simulator restarted while the image was being built";
      recordPushStatus(deps, workspace, item.doc.metadata.resourceType, item.name, "FAILED", "failed", `${why}; push it again`);
    }
  }
}
