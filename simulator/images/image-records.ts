import { createHash } from "node:crypto";
import { errors } from "../../src/errors.js";
import { toIso as iso } from "../../src/clock.js";
import type { OpContext } from "../http/operation.js";
import type { ResourceDoc } from "../resources/kind.js";
import { publicView } from "../resources/render.js";
import type { StoredResource } from "../store/resources.js";
import { IMAGE_KIND, RESOURCE_TYPES, SINGULAR, type ImageDoc, type ResourceType } from "./image-doc.js";
import { meterImage } from "./image-usage.js";
import type { SimClock } from "../clock.js";
import type { ResourceStore } from "../store/resources.js";
import type { UsageMeter } from "../metrics/meter.js";

/**
 * Container images, per workspace and resource type. Storage is modelled as
 * layers (digest → size): tags reference layers, a shared copy references the
 * same digests (no duplication), and deleting a tag keeps layers other tags use.
 */
export { IMAGE_KIND, RESOURCE_TYPES, SINGULAR, type ImageDoc, type ResourceType, type Tag } from "./image-doc.js";

const BASE_LAYER = 50 * 2 ** 20;
const TOP_LAYER = 5 * 2 ** 20;
const digest = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;

/** What the image records use: the store, the clock, and the meter (an image's storage is metered). */
export interface ImageRecordDeps {
  resources: ResourceStore;
  clock: SimClock;
  meter: UsageMeter;
}

export function parseResourceType(value: string | undefined): ResourceType {
  const plural = (RESOURCE_TYPES as readonly string[]).includes(value ?? "") ? (value as ResourceType) : RESOURCE_TYPES.find((t) => SINGULAR[t] === value);
  if (!plural) throw errors.badRequest(`resourceType: expected one of ${RESOURCE_TYPES.join(", ")}`);
  return plural;
}

export function loadImage(deps: ImageRecordDeps, ctx: OpContext, workspace = ctx.workspace): StoredResource<ImageDoc> {
  const type = parseResourceType(ctx.params.resourceType);
  const item = deps.resources.get<ImageDoc>(workspace, IMAGE_KIND, ctx.params.imageName!, type);
  if (!item) throw errors.notFound(`image ${type}/${ctx.params.imageName} not found`);
  return item;
}

/** Recomputes sizes from the layers tags still reference, dropping unreferenced layers. */
export function recomputeSizes(doc: ImageDoc): void {
  const used = new Set(doc.spec.tags.flatMap((t) => t.__layers));
  doc.__layerSizes = Object.fromEntries(Object.entries(doc.__layerSizes).filter(([d]) => used.has(d)));
  for (const tag of doc.spec.tags) tag.size = tag.__layers.reduce((n, d) => n + (doc.__layerSizes[d] ?? 0), 0);
  doc.spec.size = Object.values(doc.__layerSizes).reduce((a, b) => a + b, 0);
}

/** Registers `tag` of an image: a base layer shared by all tags of the repository plus a tag-specific layer. */
export function pushTag(deps: ImageRecordDeps, ctx: OpContext, type: ResourceType, name: string, tag: string): ImageDoc {
  const now = iso(deps.clock.now());
  const existing = deps.resources.get<ImageDoc>(ctx.workspace, IMAGE_KIND, name, type);
  const doc: ImageDoc = existing?.doc ?? {
    metadata: {
      name,
      displayName: name,
      resourceType: type,
      workspace: ctx.workspace,
      status: "DEPLOYED",
      events: [],
      createdAt: now,
      updatedAt: now,
      lastDeployedAt: now,
    },
    spec: { size: 0, tags: [] },
    __layerSizes: {},
  };
  const base = digest(`${type}/${name}`);
  const top = digest(`${type}/${name}:${tag}`);
  doc.__layerSizes[base] = BASE_LAYER;
  doc.__layerSizes[top] = TOP_LAYER;
  const current = doc.spec.tags.find((t) => t.name === tag);
  if (current) current.updatedAt = now;
  else doc.spec.tags.push({ name: tag, size: 0, createdAt: now, updatedAt: now, __layers: [base, top] });
  doc.metadata.updatedAt = now;
  doc.metadata.lastDeployedAt = now;
  doc.metadata.events = [...doc.metadata.events, { type: "deployment", status: "DEPLOYED", message: `pushed ${name}:${tag}`, revision: tag, time: now }];
  recomputeSizes(doc);
  if (existing) {
    existing.doc = doc;
    deps.resources.update(existing);
  } else
    deps.resources.insert({
      workspace: ctx.workspace,
      kind: IMAGE_KIND,
      parent: type,
      name,
      createdMs: deps.clock.now(),
      status: "DEPLOYED",
      doc: doc,
    });
  meterImage(deps, deps.resources.get<ImageDoc>(ctx.workspace, IMAGE_KIND, name, type)!);
  return doc;
}

/** Resources whose runtime image is this repository at this tag ("name:tag", optionally with a registry prefix). */
export function tagUsers(deps: ImageRecordDeps, ctx: OpContext, name: string, tag: string): string[] {
  const matches = (image: unknown) =>
    typeof image === "string" &&
    (image === `${name}:${tag}` || image.endsWith(`/${name}:${tag}`) || (tag === "latest" && (image === name || image.endsWith(`/${name}`))));
  // An application names its image in spec.image (its active revision's), the other kinds in spec.runtime.image.
  return deps.resources
    .allOfKind<ResourceDoc>(ctx.workspace, ["agent", "function", "sandbox", "job", "application"])
    .filter((r) => matches(r.kind === "application" ? applicationImage(r.doc) : (r.doc.spec?.runtime as { image?: unknown } | undefined)?.image))
    .map((r) => `${r.kind} ${r.name}`);
}

/** The image an application runs: its active revision's (newest first), else spec.image. */
function applicationImage(doc: ResourceDoc): unknown {
  const revisions = doc.spec?.revisions as { image?: unknown }[] | undefined;
  return revisions?.[0]?.image ?? doc.spec?.image;
}

export function renderImage(doc: ImageDoc): unknown {
  const view = publicView(doc);
  return { ...view, spec: { size: view.spec.size, tags: view.spec.tags.map((t) => publicView(t)) } };
}

/** A metadata-only copy for another workspace: same layer digests, so storage is not duplicated. */
export function copyFor(doc: ImageDoc, targetWorkspace: string, sourceWorkspace: string, nowMs: number): ImageDoc {
  const now = iso(nowMs);
  return {
    ...structuredClone(doc),
    metadata: { ...structuredClone(doc.metadata), workspace: targetWorkspace, sourceWorkspace, createdAt: now, updatedAt: now },
  };
}
