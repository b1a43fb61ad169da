import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import { Reply, type Operation, type OpContext } from "../http/operation.js";
import { nameSchema } from "../resources/metadata.js";
import { copyFor, IMAGE_KIND, loadImage, parseResourceType, pushTag, recomputeSizes, renderImage, SINGULAR, tagUsers, type ImageDoc } from "./store.js";
import { storeImageDocs, withStoreImages } from "./store-view.js";
import { meterImage, unmeterImage } from "./usage.js";

/**
 * Image registry and sharing. Same account: the share applies at once (200,
 * metadata copied). Another account: a pending share (202) that an admin of
 * the target workspace accepts or declines; `targetAccountId` must name the
 * target's account (anti-spam check).
 */
const SHARE_KIND = "image-share";
/** Pending shares concern two workspaces; they live in one bucket outside any workspace. */
const PENDING_BUCKET = "";
const PENDING_KIND = "pending-image-share";
const PENDING_TTL_MS = 7 * 24 * 3_600_000;

interface PendingShare {
  id: string;
  imageName: string;
  resourceType: string;
  sourceWorkspace: string;
  sourceAccountId: string;
  targetWorkspace: string;
  targetAccountId: string;
  sharedBy: string;
  expiresAt: string;
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
}

const CreateBody = z.strictObject({ name: z.string().min(1), resourceType: z.string(), image: z.string().optional(), generation: z.string().optional() });
const ShareBody = z.strictObject({ targetWorkspace: z.string().min(1, "required"), targetAccountId: z.string().optional() });

const shareKey = (ctx: OpContext) => `${parseResourceType(ctx.params.resourceType)}/${ctx.params.imageName}`;

/**
 * Copies a shared image into the target workspace. An image of the same
 * name there is never replaced: tags it lacks are added beside
 * its own; a tag it already has is a 409 unless `force` (accepting a pending
 * share with ?force=true), which replaces those tags only.
 */
function copyInto(ctx: OpContext, doc: ImageDoc, target: string, source: string, force: boolean): ImageDoc {
  const existing = ctx.deps.resources.get<ImageDoc>(target, IMAGE_KIND, doc.metadata.name, doc.metadata.resourceType);
  const copy = copyFor(doc, target, source, ctx.deps.clock.now());
  let result = copy;
  if (existing) {
    const clashing = existing.doc.spec.tags.filter((t) => doc.spec.tags.some((s) => s.name === t.name)).map((t) => t.name);
    if (clashing.length && !force)
      throw errors.conflict(
        `workspace "${target}" already has image ${doc.metadata.name} with tag${clashing.length > 1 ? "s" : ""} ${clashing.join(", ")}: an existing image is never replaced (a pending share accepted with force=true replaces those tags)`,
      );
    result = structuredClone(existing.doc);
    result.spec.tags = [...result.spec.tags.filter((t) => !clashing.includes(t.name)), ...copy.spec.tags];
    result.__layerSizes = { ...result.__layerSizes, ...copy.__layerSizes };
    recomputeSizes(result);
    result.metadata.updatedAt = copy.metadata.updatedAt;
    existing.doc = result;
    ctx.deps.resources.update(existing as never);
  } else
    ctx.deps.resources.insert({
      workspace: target,
      kind: IMAGE_KIND,
      parent: doc.metadata.resourceType,
      name: doc.metadata.name,
      createdMs: ctx.deps.clock.now(),
      status: "DEPLOYED",
      doc: copy as never,
    });
  meterImage(ctx.deps, ctx.deps.resources.get<ImageDoc>(target, IMAGE_KIND, doc.metadata.name, doc.metadata.resourceType)!);
  return result;
}

function pendingShare(ctx: OpContext): { item: NonNullable<ReturnType<OpContext["deps"]["resources"]["get"]>>; share: PendingShare } {
  const item = ctx.deps.resources.get<PendingShare>(PENDING_BUCKET, PENDING_KIND, ctx.params.pendingShareId!);
  if (!item) throw errors.notFound(`pending share "${ctx.params.pendingShareId}" not found`);
  const share = item.doc;
  if (ctx.principal.workspaces.get(share.targetWorkspace) !== "admin")
    throw errors.forbidden(`only an admin of workspace "${share.targetWorkspace}" may answer this share`);
  return { item: item as never, share };
}

function closePending(ctx: OpContext, share: PendingShare, accepted: boolean): void {
  ctx.deps.resources.delete(PENDING_BUCKET, PENDING_KIND, share.id);
  const key = `${share.resourceType}/${share.imageName}`;
  const entry = ctx.deps.resources.get(share.sourceWorkspace, SHARE_KIND, share.targetWorkspace, key);
  if (!entry) return;
  if (accepted) {
    entry.doc = { ...entry.doc, status: "active", pendingShareId: undefined };
    entry.status = "active";
    ctx.deps.resources.update(entry);
  } else ctx.deps.resources.delete(share.sourceWorkspace, SHARE_KIND, share.targetWorkspace, key);
}

export const imageOperations: Operation[] = [
  {
    id: "listImages",
    method: "get",
    path: "/images",
    scope: "admin",
    // The workspace's records, then the images users brought into the image store (store-view.ts).
    handler: (ctx) =>
      withStoreImages(
        ctx.deps.resources.list<ImageDoc>({ workspace: ctx.workspace, kind: IMAGE_KIND, parent: null, sort: "createdAt:desc" }).map((i) => i.doc),
        ctx.deps.images?.store,
        ctx.workspace,
      ).map(renderImage),
  },
  {
    id: "createImage",
    method: "post",
    path: "/images",
    scope: "admin",
    handler: (ctx) => {
      const body = parse(CreateBody, ctx.body ?? {}, "body");
      const type = parseResourceType(body.resourceType);
      const ref = body.image ?? body.name;
      const [repo, tag = "latest"] = ref.split("/").pop()!.split(":") as [string, string | undefined];
      parse(nameSchema, body.name, "body.name");
      pushTag(ctx, type, body.name, tag);
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
      for (const item of ctx.deps.resources.list<ImageDoc>({ workspace: ctx.workspace, kind: IMAGE_KIND, parent: null, sort: "createdAt:asc" })) {
        if (item.doc.spec.tags.some((t) => tagUsers(ctx, item.name, t.name).length)) continue;
        ctx.deps.resources.delete(ctx.workspace, IMAGE_KIND, item.name, item.parent);
        unmeterImage(ctx.deps, item);
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
        !ctx.deps.resources.get(ctx.workspace, IMAGE_KIND, ctx.params.imageName!, type) && type === "sandboxes" && ctx.deps.images
          ? storeImageDocs(ctx.deps.images.store, ctx.workspace).find((d) => d.metadata.name === ctx.params.imageName)
          : undefined;
      return renderImage(fromStore ?? loadImage(ctx).doc);
    },
  },
  {
    id: "deleteImage",
    method: "delete",
    path: "/images/:resourceType/:imageName",
    scope: "admin",
    handler: (ctx) => {
      const item = loadImage(ctx);
      const users = item.doc.spec.tags.flatMap((t) => tagUsers(ctx, item.name, t.name));
      if (users.length) throw new ApiError("bad_request", `image ${item.name} is in use by ${users.join(", ")}`);
      ctx.deps.resources.delete(ctx.workspace, IMAGE_KIND, item.name, item.parent);
      unmeterImage(ctx.deps, item);
      return renderImage(item.doc);
    },
  },
  {
    id: "deleteImageTag",
    method: "delete",
    path: "/images/:resourceType/:imageName/tags/:tagName",
    scope: "admin",
    handler: (ctx) => {
      const item = loadImage(ctx);
      const tag = ctx.params.tagName!;
      if (!item.doc.spec.tags.some((t) => t.name === tag)) throw errors.notFound(`tag "${tag}" not found on ${item.name}`);
      const users = tagUsers(ctx, item.name, tag);
      if (users.length) throw errors.conflict(`tag ${item.name}:${tag} is in use by ${users.join(", ")}`);
      item.doc.spec.tags = item.doc.spec.tags.filter((t) => t.name !== tag);
      recomputeSizes(item.doc);
      item.doc.metadata.updatedAt = iso(ctx.deps.clock.now());
      ctx.deps.resources.update(item as never);
      meterImage(ctx.deps, item);
      return renderImage(item.doc);
    },
  },
  {
    id: "listImageShares",
    method: "get",
    path: "/images/:resourceType/:imageName/share",
    scope: "admin",
    handler: (ctx) => {
      loadImage(ctx);
      return ctx.deps.resources.list({ workspace: ctx.workspace, kind: SHARE_KIND, parent: shareKey(ctx), sort: "createdAt:asc" }).map((s) => s.doc);
    },
  },
  {
    id: "shareImage",
    method: "post",
    path: "/images/:resourceType/:imageName/share",
    scope: "admin",
    handler: (ctx) => {
      const item = loadImage(ctx);
      const body = parse(ShareBody, ctx.body ?? {}, "body");
      const target = ctx.deps.accounts.workspace(body.targetWorkspace);
      if (!target) throw errors.notFound(`workspace "${body.targetWorkspace}" not found`);
      if (target.name === ctx.workspace) throw errors.badRequest("targetWorkspace: an image cannot be shared with its own workspace");
      const key = shareKey(ctx);
      if (ctx.deps.resources.get(ctx.workspace, SHARE_KIND, target.name, key)) throw errors.conflict(`already shared with "${target.name}"`);
      const sourceAccount = ctx.deps.accounts.workspace(ctx.workspace)!.accountId;
      const now = ctx.deps.clock.now();
      const entry = {
        workspace: target.name,
        accountId: target.accountId,
        status: "active",
        workspaceDisplayName: String(target.doc.displayName ?? target.name),
      };
      if (target.accountId === sourceAccount) {
        // Applied at once, so the sharer must administer the target too (a member of the source only gets 403).
        if (ctx.principal.workspaces.get(target.name) !== "admin")
          throw errors.forbidden(`sharing into workspace "${target.name}" at once needs an admin of it`);
        const copy = copyInto(ctx, item.doc, target.name, ctx.workspace, false);
        ctx.deps.resources.insert({ workspace: ctx.workspace, kind: SHARE_KIND, parent: key, name: target.name, createdMs: now, status: "active", doc: entry });
        return renderImage(copy);
      }
      if (body.targetAccountId !== target.accountId) throw errors.badRequest("targetAccountId: does not match the target workspace's account");
      const share: PendingShare = {
        id: ctx.deps.ids(),
        imageName: item.name,
        resourceType: item.parent,
        sourceWorkspace: ctx.workspace,
        sourceAccountId: sourceAccount,
        targetWorkspace: target.name,
        targetAccountId: target.accountId,
        sharedBy: ctx.actor,
        expiresAt: iso(now + PENDING_TTL_MS),
        createdAt: iso(now),
        updatedAt: iso(now),
        createdBy: ctx.actor,
        updatedBy: ctx.actor,
      };
      ctx.deps.resources.insert({
        workspace: PENDING_BUCKET,
        kind: PENDING_KIND,
        parent: "",
        name: share.id,
        createdMs: now,
        status: "pending",
        doc: share as never,
      });
      ctx.deps.resources.insert({
        workspace: ctx.workspace,
        kind: SHARE_KIND,
        parent: key,
        name: target.name,
        createdMs: now,
        status: "pending",
        doc: { ...entry, status: "pending", pendingShareId: share.id },
      });
      return new Reply(202, share);
    },
  },
  {
    id: "unshareImage",
    method: "delete",
    path: "/images/:resourceType/:imageName/share/:targetWorkspace",
    scope: "admin",
    handler: (ctx) => {
      const item = loadImage(ctx);
      const entry = ctx.deps.resources.get<{ status: string; pendingShareId?: string }>(ctx.workspace, SHARE_KIND, ctx.params.targetWorkspace!, shareKey(ctx));
      if (!entry) throw errors.notFound(`not shared with "${ctx.params.targetWorkspace}"`);
      ctx.deps.resources.delete(ctx.workspace, SHARE_KIND, entry.name, entry.parent);
      if (entry.doc.pendingShareId) ctx.deps.resources.delete(PENDING_BUCKET, PENDING_KIND, entry.doc.pendingShareId);
      else {
        const copy = ctx.deps.resources.get<ImageDoc>(entry.name, IMAGE_KIND, item.name, item.parent);
        if (copy?.doc.metadata.sourceWorkspace === ctx.workspace) ctx.deps.resources.delete(entry.name, IMAGE_KIND, item.name, item.parent);
      }
      return renderImage(item.doc);
    },
  },
  {
    id: "listPendingImageShares",
    method: "get",
    path: "/pending-image-shares",
    scope: "admin",
    handler: (ctx) => {
      const outgoing = ctx.query.direction === "outgoing";
      if (ctx.query.direction !== undefined && !outgoing && ctx.query.direction !== "incoming")
        throw errors.badRequest("query.direction: expected incoming or outgoing");
      return ctx.deps.resources
        .list<PendingShare>({ workspace: PENDING_BUCKET, kind: PENDING_KIND, sort: "createdAt:desc" })
        .map((p) => p.doc)
        .filter((s) => (outgoing ? s.sourceWorkspace : s.targetWorkspace) === ctx.workspace)
        .map((s) => {
          const { updatedAt: _u, createdBy: _c, updatedBy: _b, ...rest } = s;
          const conflict = ctx.deps.resources.get<ImageDoc>(s.targetWorkspace, IMAGE_KIND, s.imageName, s.resourceType);
          return {
            ...rest,
            hasConflict: Boolean(conflict),
            sharedByEmail: s.sharedBy,
            sourceWorkspaceDisplayName: s.sourceWorkspace,
            targetWorkspaceDisplayName: s.targetWorkspace,
          };
        });
    },
  },
  {
    id: "acceptImageShare",
    method: "post",
    path: "/pending-image-shares/:pendingShareId/accept",
    scope: "admin",
    level: "account",
    handler: (ctx) => {
      const { share } = pendingShare(ctx);
      if (Date.parse(share.expiresAt) <= ctx.deps.clock.now()) throw new ApiError("gone", `pending share "${share.id}" expired at ${share.expiresAt}`);
      const source = ctx.deps.resources.get<ImageDoc>(share.sourceWorkspace, IMAGE_KIND, share.imageName, share.resourceType);
      if (!source) throw errors.notFound(`image ${share.resourceType}/${share.imageName} no longer exists`);
      const copy = copyInto(ctx, source.doc, share.targetWorkspace, share.sourceWorkspace, queryBool(ctx.query.force));
      closePending(ctx, share, true);
      return renderImage(copy);
    },
  },
  {
    id: "declineImageShare",
    method: "post",
    path: "/pending-image-shares/:pendingShareId/decline",
    scope: "admin",
    level: "account",
    handler: (ctx) => {
      closePending(ctx, pendingShare(ctx).share, false);
      return new Reply(204);
    },
  },
];
