import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import { Reply, type Operation, type OpContext } from "../http/operation.js";
import { nameSchema } from "../resources/metadata.js";
import { copyFor, IMAGE_KIND, loadImage, parseResourceType, pushTag, recomputeSizes, renderImage, SINGULAR, tagUsers, type ImageDoc } from "./image-records.js";
import { storeImageDocs, withStoreImages } from "./store-view.js";
import { meterImage, unmeterImage } from "./image-usage.js";

import { imageShareOperations } from "./shares.js";
import type { ResourceStore } from "../store/resources.js";
import type { SimClock } from "../clock.js";
import type { Ids } from "../../src/ids.js";
import type { SandboxImageSource } from "./sandbox-images.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { AccountStore } from "../store/accounts.js";

/** The image registry: the workspace's image records, the store behind sandbox images (if any), ids, clock and meter. */
export interface ImageRouteDeps {
  resources: ResourceStore;
  clock: SimClock;
  meter: UsageMeter;
  accounts: AccountStore;
  ids: Ids;
  images: SandboxImageSource;
}

const CreateBody = z.strictObject({
  name: z.string().min(1),
  resourceType: z.string(),
  image: z.string().optional(),
  generation: z.string().optional(),
  // What `bl push` sends beside (cli/push.go createImageRequest): kept by the platform for its build worker.
  labels: z.record(z.string(), z.string()).optional(),
  dockerConfig: z.string().optional(),
  memoryMb: z.number().int().optional(),
  volumeMb: z.number().int().optional(),
});

/**
 * Image registry operations, then sharing (shares.ts). `push` serves `POST /images?upload=true` (`bl push` of a
 * source build: image-push.ts); without it that form registers the name only.
 */
export function imageOperations(deps: ImageRouteDeps, push?: (ctx: OpContext) => Reply): Operation[] {
  return [
    {
      id: "listImages",
      method: "get",
      path: "/images",
      scope: "admin",
      // The workspace's records, then the images users brought into the image store (store-view.ts).
      handler: (ctx) =>
        withStoreImages(
          deps.resources.list<ImageDoc>({ workspace: ctx.workspace, kind: IMAGE_KIND, parent: null, sort: "createdAt:desc" }).map((i) => i.doc),
          deps.images.store,
          ctx.workspace,
        ).map(renderImage),
    },
    {
      id: "createImage",
      method: "post",
      path: "/images",
      scope: "admin",
      handler: (ctx) => {
        if (push && queryBool(ctx.query.upload)) return push(ctx);
        const body = parse(CreateBody, ctx.body ?? {}, "body");
        const type = parseResourceType(body.resourceType);
        const ref = body.image ?? body.name;
        const [repo, tag = "latest"] = ref.split("/").pop()!.split(":") as [string, string | undefined];
        parse(nameSchema, body.name, "body.name");
        pushTag(deps, ctx, type, body.name, tag);
        return { image: `${repo}:${tag}`, name: body.name, resourceType: SINGULAR[type], message: `image ${body.name}:${tag} registered` };
      },
    },
    {
      id: "cleanupImages",
      method: "delete",
      path: "/images",
      scope: "admin",
      handler: (ctx) => {
        let deleted = 0;
        for (const item of deps.resources.list<ImageDoc>({ workspace: ctx.workspace, kind: IMAGE_KIND, parent: null, sort: "createdAt:asc" })) {
          if (item.doc.spec.tags.some((t) => tagUsers(deps, ctx, item.name, t.name).length)) continue;
          deps.resources.delete(ctx.workspace, IMAGE_KIND, item.name, item.parent);
          unmeterImage(deps, item);
          deleted++;
        }
        return { deleted, message: `${deleted} unused image${deleted === 1 ? "" : "s"} deleted` };
      },
    },
    {
      id: "getImage",
      method: "get",
      path: "/images/:resourceType/:imageName",
      scope: "admin",
      handler: (ctx) => {
        const type = parseResourceType(ctx.params.resourceType);
        const fromStore =
          !deps.resources.get(ctx.workspace, IMAGE_KIND, ctx.params.imageName!, type) && type === "sandboxes" && deps.images.store
            ? storeImageDocs(deps.images.store, ctx.workspace).find((d) => d.metadata.name === ctx.params.imageName)
            : undefined;
        return renderImage(fromStore ?? loadImage(deps, ctx).doc);
      },
    },
    {
      id: "deleteImage",
      method: "delete",
      path: "/images/:resourceType/:imageName",
      scope: "admin",
      handler: (ctx) => {
        const item = loadImage(deps, ctx);
        const users = item.doc.spec.tags.flatMap((t) => tagUsers(deps, ctx, item.name, t.name));
        if (users.length) throw new ApiError("bad_request", `image ${item.name} is in use by ${users.join(", ")}`);
        deps.resources.delete(ctx.workspace, IMAGE_KIND, item.name, item.parent);
        unmeterImage(deps, item);
        return renderImage(item.doc);
      },
    },
    {
      id: "deleteImageTag",
      method: "delete",
      path: "/images/:resourceType/:imageName/tags/:tagName",
      scope: "admin",
      handler: (ctx) => {
        const item = loadImage(deps, ctx);
        const tag = ctx.params.tagName!;
        if (!item.doc.spec.tags.some((t) => t.name === tag)) throw errors.notFound(`tag "${tag}" not found on ${item.name}`);
        const users = tagUsers(deps, ctx, item.name, tag);
        if (users.length) throw errors.conflict(`tag ${item.name}:${tag} is in use by ${users.join(", ")}`);
        item.doc.spec.tags = item.doc.spec.tags.filter((t) => t.name !== tag);
        recomputeSizes(item.doc);
        item.doc.metadata.updatedAt = iso(deps.clock.now());
        deps.resources.update(item);
        meterImage(deps, item);
        return renderImage(item.doc);
      },
    },
    ...imageShareOperations(deps),
  ];
}
