import { parseImageRef } from "./image-ref.js";
import type { ImageStore } from "./image-store.js";
import type { ImageDoc } from "./image-records.js";

/**
 * The image store as the Images API shows it: the images a user brought
 * (imported, or exported from the Docker daemon) are the workspace's sandbox
 * images, as custom images are on the platform, with their real sizes. Hub
 * images are the platform's own and are not listed (the platform lists only
 * a workspace's images). A pushed record of the same repository wins: it is
 * what the workspace registered.
 */

/** The API's name of a reference: its last path component (createImage does the same with `image`). */
const repoName = (ref: string) => parseImageRef(ref).repository.split("/").pop()!;

export function storeImageDocs(store: ImageStore, workspace: string): ImageDoc[] {
  const byName = new Map<string, ImageDoc>();
  for (const image of store.list()) {
    if (image.manifest.source === "recipe") continue;
    const ref = parseImageRef(image.ref);
    const name = repoName(image.ref);
    const created = image.manifest.created;
    const doc = byName.get(name) ?? {
      metadata: {
        name,
        displayName: name,
        resourceType: "sandboxes",
        workspace,
        status: "DEPLOYED",
        events: [],
        createdAt: created,
        updatedAt: created,
        lastDeployedAt: created,
      },
      spec: { size: 0, tags: [] },
      __layerSizes: {},
    };
    if (!doc.spec.tags.some((t) => t.name === ref.tag))
      doc.spec.tags.push({ name: ref.tag, size: image.manifest.size, createdAt: created, updatedAt: created, __layers: [image.manifest.digest] });
    doc.__layerSizes[image.manifest.digest] = image.manifest.size;
    doc.spec.size = Object.values(doc.__layerSizes).reduce((a, b) => a + b, 0);
    if (created > doc.metadata.updatedAt) doc.metadata.updatedAt = doc.metadata.lastDeployedAt = created;
    if (created < doc.metadata.createdAt) doc.metadata.createdAt = created;
    byName.set(name, doc);
  }
  return [...byName.values()];
}

/** Records first, then the store's images no record names (same resource type and name). */
export function withStoreImages(records: ImageDoc[], store: ImageStore | undefined, workspace: string): ImageDoc[] {
  if (!store) return records;
  const taken = new Set(records.map((d) => `${d.metadata.resourceType}/${d.metadata.name}`));
  return [...records, ...storeImageDocs(store, workspace).filter((d) => !taken.has(`sandboxes/${d.metadata.name}`))];
}
