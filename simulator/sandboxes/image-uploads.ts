import { randomBytes } from "node:crypto";
import { createWriteStream, mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Transform } from "node:stream";
import { ApiError, errors } from "../../src/errors.js";
import { toIso as iso } from "../../src/clock.js";
import type { Logger } from "../../src/logging.js";
import { Reply, type OpContext } from "../http/operation.js";
import { loadItem, renderDoc } from "../resources/crud.js";
import type { ResourceDoc } from "../resources/kind.js";
import type { SandboxResourceDeps } from "./runtime.js";
import { sandboxKind } from "./kind.js";
import { createRecord } from "./records-runtime.js";
import { recordStatus } from "./status.js";
import type { ImageStore } from "../images/image-store.js";
import type { Progress } from "../images/progress.js";
import { buildTemplate } from "../images/template-build.js";
import { unzipInto } from "../images/zip-reader.js";

/**
 * Sandbox images built from an uploaded context, as the platform's deploy flow does (ImageInstance.build,
 * `bl deploy` of a sandbox template): `POST /sandboxes?upload=true` (or `PUT /sandboxes/{name}?upload=true`)
 * answers the sandbox UPLOADING with `X-Blaxel-Upload-Url`; the zip PUT there (no credential: the URL is the
 * secret, as the platform's presigned URL) is built by the template builder (template-build.ts: docker build,
 * else buildah, offline bases through the stand-ins) into `sandbox/<name>:latest`, the build's lines are the
 * sandbox's events, BUILDING while it runs; then the sandbox (re)starts on it, DEPLOYING → DEPLOYED, or it is
 * FAILED with the build's last lines.
 */

/** The repository an uploaded sandbox's image is kept under: `sandbox/<name>:latest`, what applications name. */
export const BUILT_SANDBOX_REPOSITORY = "sandbox";
/** How long an upload URL takes a zip. */
const UPLOAD_TTL_MS = 60 * 60_000;
const MAX_UPLOAD_BYTES = 2 * 2 ** 30;
/** Build lines kept among a sandbox's events (the newest): an apt-get install says thousands. */
const MAX_BUILD_EVENTS = 400;
const FLUSH_MS = 500;

interface PendingUpload {
  workspace: string;
  sandbox: string;
  ctx: OpContext;
  expiresMs: number;
  generation: number;
  /** What a PUT ?upload=true asked beside the build (bl deploy sends the whole resource): applied with the image. */
  spec?: Record<string, unknown>;
  labels?: Record<string, unknown>;
  /** Another build than a sandbox's (`bl push`: POST /images?upload=true, images/image-push.ts). */
  build?: (work: string, zip: string, bytes: number) => Promise<void>;
}

export const builtImageName = (sandbox: string) => `${BUILT_SANDBOX_REPOSITORY}/${sandbox}:latest`;

export class ImageUploads {
  private readonly pending = new Map<string, PendingUpload>();
  /** The latest upload per sandbox: an older build that ends later changes nothing. */
  private readonly latest = new Map<string, number>();
  private generations = 0;

  constructor(
    /** undefined without an image store (--image-source host, records only): uploads then answer 501. */
    private readonly imageStore: ImageStore | undefined,
    private readonly logger?: Logger,
  ) {}

  private get store(): ImageStore {
    if (!this.imageStore) throw new ApiError("not_implemented", "image builds from an uploaded context need the image store (--image-source store)");
    return this.imageStore;
  }

  /** POST /sandboxes?upload=true: the record, UPLOADING, nothing started until its image is built. */
  create(deps: SandboxResourceDeps, ctx: OpContext): Reply {
    void this.store; // 501 before anything is recorded, where there is no image store
    const doc = createRecord(deps, ctx, {
      reused() {},
      creating: (_ctx, created) => {
        delete created.__pending;
        created.status = "UPLOADING";
        created.events = [event(deps, created, "UPLOADING", "uploading: waiting for the build context at X-Blaxel-Upload-Url")];
      },
      created() {},
    });
    return new Reply(200, doc, { "X-Blaxel-Upload-Url": this.issue(deps, ctx, (doc as ResourceDoc).metadata.name) });
  }

  /** PUT /sandboxes/{name}?upload=true: a new build of an existing sandbox (404 when there is none: the SDK then creates it). */
  update(deps: SandboxResourceDeps, ctx: OpContext): Reply {
    void this.store; // 501 before anything is recorded, where there is no image store
    const name = ctx.params.sandboxName!;
    loadItem(deps, sandboxKind, ctx, name, "");
    recordStatus(deps, ctx.workspace, name, "UPLOADING", "uploading: waiting for the build context at X-Blaxel-Upload-Url");
    const doc = renderDoc(deps, sandboxKind, loadItem(deps, sandboxKind, ctx, name, "").doc, false, ctx);
    const body = (ctx.body ?? {}) as { spec?: unknown; metadata?: { labels?: unknown } };
    const asked = {
      spec: isObject(body.spec) ? body.spec : undefined,
      labels: isObject(body.metadata?.labels) ? body.metadata.labels : undefined,
    };
    return new Reply(200, doc, { "X-Blaxel-Upload-Url": this.issue(deps, ctx, name, asked) });
  }

  /**
   * POST /images?upload=true (`bl push`): an upload URL whose zip `build` builds (images/image-push.ts); 501
   * without an image store, as the sandbox uploads.
   */
  pushImage(deps: SandboxResourceDeps, ctx: OpContext, push: (store: ImageStore) => { key: string; build: NonNullable<PendingUpload["build"]> }): string {
    const { key, build } = push(this.store);
    return this.issue(deps, ctx, key, { build });
  }

  private issue(deps: SandboxResourceDeps, ctx: OpContext, sandbox: string, asked: Pick<PendingUpload, "spec" | "labels" | "build"> = {}): string {
    const token = randomBytes(24).toString("base64url");
    const generation = ++this.generations;
    this.latest.set(`${ctx.workspace}/${sandbox}`, generation);
    const now = deps.clock.now();
    for (const [t, p] of this.pending) if (p.expiresMs < now) this.pending.delete(t);
    this.pending.set(token, { workspace: ctx.workspace, sandbox, ctx, expiresMs: now + UPLOAD_TTL_MS, generation, ...asked });
    return `${deps.urls.base}/uploads/${token}`;
  }

  /** PUT <upload URL>: takes the zip and answers at once (as the storage the platform's URL points at); the build goes on. */
  async receive(deps: SandboxResourceDeps, token: string, body: Readable): Promise<void> {
    const upload = this.pending.get(token);
    if (!upload || upload.expiresMs < deps.clock.now()) throw errors.notFound("no such upload (the URL expired or was used)");
    this.pending.delete(token);
    const work = join(this.store.dir, "tmp", `upload-${process.pid}-${token.slice(0, 12)}`);
    mkdirSync(work, { recursive: true });
    const zip = join(work, "context.zip");
    let bytes = 0;
    try {
      await pipeline(
        body,
        new Transform({
          transform(chunk: Buffer, _enc, next) {
            bytes += chunk.length;
            next(bytes > MAX_UPLOAD_BYTES ? new ApiError("payload_too_large", `the build context is over ${MAX_UPLOAD_BYTES} bytes`) : null, chunk);
          },
        }),
        createWriteStream(zip),
      );
    } catch (err) {
      await rm(work, { recursive: true, force: true });
      throw err;
    }
    const building = upload.build ? upload.build(work, zip, bytes) : this.build(deps, upload, work, zip, bytes);
    void building.finally(() => rm(work, { recursive: true, force: true }));
  }

  private superseded(upload: PendingUpload): boolean {
    return this.latest.get(`${upload.workspace}/${upload.sandbox}`) !== upload.generation;
  }

  private async build(deps: SandboxResourceDeps, upload: PendingUpload, work: string, zip: string, bytes: number): Promise<void> {
    const { workspace, sandbox } = upload;
    const lines = buildEvents(deps, workspace, sandbox);
    recordStatus(deps, workspace, sandbox, "BUILDING", `building: the uploaded context (${bytes} bytes)`);
    try {
      const context = join(work, "context");
      mkdirSync(context);
      await unzipInto(zip, context);
      const image = await buildTemplate(this.store, builtImageName(sandbox), context, { progress: lines.progress });
      lines.flush();
      if (this.superseded(upload)) return;
      // Its own tag too: the sandbox names the build it runs, so a new build is a new image to it (a reboot).
      const own = `${BUILT_SANDBOX_REPOSITORY}/${sandbox}:${image.manifest.digest.replace(/^sha256:/, "").slice(0, 12)}`;
      this.store.tag(image.ref, own);
      await this.deploy(deps, upload, own);
    } catch (err) {
      lines.flush();
      if (this.superseded(upload)) return;
      const message = (err as Error).message;
      this.logger?.warn({ workspace, sandbox, err: message.split("\n")[0] }, "sandbox image build failed");
      if (deps.resources.get(workspace, "sandbox", sandbox)?.status !== "FAILED") recordStatus(deps, workspace, sandbox, "FAILED", `build failed: ${message}`);
    } finally {
      lines.stop();
    }
  }

  /** The sandbox runs the new image: the update path's reboot (its files reset, as an image change does on the platform). */
  private async deploy(deps: SandboxResourceDeps, upload: PendingUpload, image: string): Promise<void> {
    const item = deps.resources.get<ResourceDoc>(upload.workspace, "sandbox", upload.sandbox);
    if (!item) return; // deleted meanwhile
    const doc = item.doc;
    const runtime = (doc.spec.runtime ?? {}) as Record<string, unknown>;
    const asked = upload.spec ?? {};
    const askedRuntime = isObject(asked.runtime) ? asked.runtime : {};
    const body = {
      metadata: { name: doc.metadata.name, labels: upload.labels ?? doc.metadata.labels },
      spec: { ...doc.spec, ...asked, runtime: { ...runtime, ...askedRuntime, image } },
    };
    const unchanged = runtime.image === image;
    await deps.sandboxes.update({ ...upload.ctx, params: { sandboxName: upload.sandbox }, query: {}, body });
    const after = deps.resources.get(upload.workspace, "sandbox", upload.sandbox);
    // The same image as before (nothing in the context changed what was built): the sandbox runs it already.
    if (unchanged && after?.status === "BUILDING")
      recordStatus(deps, upload.workspace, upload.sandbox, "DEPLOYED", "deployed: the build made the image it runs");
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function event(deps: Pick<SandboxResourceDeps, "clock">, doc: object, status: string, message: string, type = "deployment") {
  return { type, status, message, revision: `rev-${(doc as { __revision?: number }).__revision ?? 1}`, time: iso(deps.clock.now()) };
}

/** The build's lines as the sandbox's events (type "build"), written in batches, the newest MAX_BUILD_EVENTS kept. */
function buildEvents(deps: SandboxResourceDeps, workspace: string, sandbox: string): { progress: Progress; flush(): void; stop(): void } {
  let queued: string[] = [];
  const flush = () => {
    if (queued.length === 0) return;
    const item = deps.resources.get<ResourceDoc & { events?: { type: string }[]; __revision?: number }>(workspace, "sandbox", sandbox);
    const lines = queued;
    queued = [];
    if (!item) return;
    const added = lines.map((line) => event(deps, item.doc, item.status, line, "build"));
    const all = [...(item.doc.events ?? []), ...added];
    let excess = all.filter((e) => e.type === "build").length - MAX_BUILD_EVENTS;
    item.doc.events = excess > 0 ? all.filter((e) => e.type !== "build" || excess-- <= 0) : all;
    deps.resources.update(item);
  };
  const timer = setInterval(flush, FLUSH_MS);
  timer.unref();
  const push = (line: string) => {
    const text = line.trimEnd();
    if (text) queued.push(text.slice(0, 2000));
  };
  return {
    progress: { phase: push, note: push, advance() {} },
    flush,
    stop: () => {
      clearInterval(timer);
      flush();
    },
  };
}
