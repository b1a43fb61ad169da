import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import { Reply, type Operation, type OpContext } from "../http/operation.js";
import type { StoredResource } from "../store/resources.js";
import { copyFor, IMAGE_KIND, loadImage, parseResourceType, recomputeSizes, renderImage, type ImageDoc } from "./image-records.js";
import { meterImage } from "./image-usage.js";
import type { ResourceStore } from "../store/resources.js";
import type { SimClock } from "../clock.js";
import type { Ids } from "../../src/ids.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { AccountStore } from "../store/accounts.js";

/**
 * Image sharing. Same account: the share applies at once (200,
 * metadata copied). Another account: a pending share (202) that an admin of
 * the target workspace accepts or declines; `targetAccountId` must name the
 * target's account (anti-spam check).
 */

/** What sharing uses: the image records of both workspaces, the accounts they belong to, ids, the clock and the meter (a copy is stored). */
export interface ImageShareDeps {
  resources: ResourceStore;
  clock: SimClock;
  meter: UsageMeter;
  accounts: AccountStore;
  ids: Ids;
}

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

const ShareBody = z.strictObject({ targetWorkspace: z.string().min(1, "required"), targetAccountId: z.string().optional() });

const shareKey = (ctx: OpContext) => `${parseResourceType(ctx.params.resourceType)}/${ctx.params.imageName}`;

/**
 * Copies a shared image into the target workspace. An image of the same
 * name there is never replaced: tags it lacks are added beside
 * its own; a tag it already has is a 409 unless `force` (accepting a pending
 * share with ?force=true), which replaces those tags only.
 */
function copyInto(deps: ImageShareDeps, ctx: OpContext, doc: ImageDoc, target: string, source: string, force: boolean): ImageDoc {
  const existing = deps.resources.get<ImageDoc>(target, IMAGE_KIND, doc.metadata.name, doc.metadata.resourceType);
  const copy = copyFor(doc, target, source, deps.clock.now());
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
    deps.resources.update(existing);
  } else
    deps.resources.insert({
      workspace: target,
      kind: IMAGE_KIND,
      parent: doc.metadata.resourceType,
      name: doc.metadata.name,
      createdMs: deps.clock.now(),
      status: "DEPLOYED",
      doc: copy,
    });
  meterImage(deps, deps.resources.get<ImageDoc>(target, IMAGE_KIND, doc.metadata.name, doc.metadata.resourceType)!);
  return result;
}

function pendingShare(deps: ImageShareDeps, ctx: OpContext): { item: StoredResource<PendingShare>; share: PendingShare } {
  const item = deps.resources.get<PendingShare>(PENDING_BUCKET, PENDING_KIND, ctx.params.pendingShareId!);
  if (!item) throw errors.notFound(`pending share "${ctx.params.pendingShareId}" not found`);
  const share = item.doc;
  if (ctx.principal.workspaces.get(share.targetWorkspace) !== "admin")
    throw errors.forbidden(`only an admin of workspace "${share.targetWorkspace}" may answer this share`);
  return { item, share };
}

function closePending(deps: ImageShareDeps, ctx: OpContext, share: PendingShare, accepted: boolean): void {
  deps.resources.delete(PENDING_BUCKET, PENDING_KIND, share.id);
  const key = `${share.resourceType}/${share.imageName}`;
  const entry = deps.resources.get(share.sourceWorkspace, SHARE_KIND, share.targetWorkspace, key);
  if (!entry) return;
  if (accepted) {
    entry.doc = { ...entry.doc, status: "active", pendingShareId: undefined };
    entry.status = "active";
    deps.resources.update(entry);
  } else deps.resources.delete(share.sourceWorkspace, SHARE_KIND, share.targetWorkspace, key);
}

export function imageShareOperations(deps: ImageShareDeps): Operation[] {
  return [
    {
      id: "listImageShares",
      method: "get",
      path: "/images/:resourceType/:imageName/share",
      scope: "admin",
      handler: (ctx) => {
        loadImage(deps, ctx);
        return deps.resources.list({ workspace: ctx.workspace, kind: SHARE_KIND, parent: shareKey(ctx), sort: "createdAt:asc" }).map((s) => s.doc);
      },
    },
    {
      id: "shareImage",
      method: "post",
      path: "/images/:resourceType/:imageName/share",
      scope: "admin",
      handler: (ctx) => {
        const item = loadImage(deps, ctx);
        const body = parse(ShareBody, ctx.body ?? {}, "body");
        const target = deps.accounts.workspace(body.targetWorkspace);
        if (!target) throw errors.notFound(`workspace "${body.targetWorkspace}" not found`);
        if (target.name === ctx.workspace) throw errors.badRequest("targetWorkspace: an image cannot be shared with its own workspace");
        const key = shareKey(ctx);
        if (deps.resources.get(ctx.workspace, SHARE_KIND, target.name, key)) throw errors.conflict(`already shared with "${target.name}"`);
        const sourceAccount = deps.accounts.workspace(ctx.workspace)!.accountId;
        const now = deps.clock.now();
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
          const copy = copyInto(deps, ctx, item.doc, target.name, ctx.workspace, false);
          deps.resources.insert({ workspace: ctx.workspace, kind: SHARE_KIND, parent: key, name: target.name, createdMs: now, status: "active", doc: entry });
          return renderImage(copy);
        }
        if (body.targetAccountId !== target.accountId) throw errors.badRequest("targetAccountId: does not match the target workspace's account");
        const share: PendingShare = {
          id: deps.ids(),
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
        deps.resources.insert({
          workspace: PENDING_BUCKET,
          kind: PENDING_KIND,
          parent: "",
          name: share.id,
          createdMs: now,
          status: "pending",
          doc: share,
        });
        deps.resources.insert({
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
        const item = loadImage(deps, ctx);
        const entry = deps.resources.get<{ status: string; pendingShareId?: string }>(ctx.workspace, SHARE_KIND, ctx.params.targetWorkspace!, shareKey(ctx));
        if (!entry) throw errors.notFound(`not shared with "${ctx.params.targetWorkspace}"`);
        deps.resources.delete(ctx.workspace, SHARE_KIND, entry.name, entry.parent);
        if (entry.doc.pendingShareId) deps.resources.delete(PENDING_BUCKET, PENDING_KIND, entry.doc.pendingShareId);
        else {
          const copy = deps.resources.get<ImageDoc>(entry.name, IMAGE_KIND, item.name, item.parent);
          if (copy?.doc.metadata.sourceWorkspace === ctx.workspace) deps.resources.delete(entry.name, IMAGE_KIND, item.name, item.parent);
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
        return deps.resources
          .list<PendingShare>({ workspace: PENDING_BUCKET, kind: PENDING_KIND, sort: "createdAt:desc" })
          .map((p) => p.doc)
          .filter((s) => (outgoing ? s.sourceWorkspace : s.targetWorkspace) === ctx.workspace)
          .map((s) => {
            const { updatedAt: _u, createdBy: _c, updatedBy: _b, ...rest } = s;
            const conflict = deps.resources.get<ImageDoc>(s.targetWorkspace, IMAGE_KIND, s.imageName, s.resourceType);
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
        const { share } = pendingShare(deps, ctx);
        if (Date.parse(share.expiresAt) <= deps.clock.now()) throw new ApiError("gone", `pending share "${share.id}" expired at ${share.expiresAt}`);
        const source = deps.resources.get<ImageDoc>(share.sourceWorkspace, IMAGE_KIND, share.imageName, share.resourceType);
        if (!source) throw errors.notFound(`image ${share.resourceType}/${share.imageName} no longer exists`);
        const copy = copyInto(deps, ctx, source.doc, share.targetWorkspace, share.sourceWorkspace, queryBool(ctx.query.force));
        closePending(deps, ctx, share, true);
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
        closePending(deps, ctx, pendingShare(deps, ctx).share, false);
        return new Reply(204);
      },
    },
  ];
}
