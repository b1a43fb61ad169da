import { z } from "zod";
import { errors, ApiError } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { scopeFor } from "../auth/scopes.js";
import { RawJson, type Operation, type OpContext } from "../http/operation.js";
import type { StoredResource } from "../store/resources.js";
import type { AnyResourceKind, ResourceDeps, ResourceDoc, ResourceKind } from "./kind.js";
import { DEPLOYMENT_STATUSES, forceStatus, PLANS, settle, startPlan, type Deployable } from "./lifecycle.js";
import { listResources } from "./listing.js";
import { metadataInput, newMetadata, updatedMetadata } from "./metadata.js";
import { keepMaskedSecrets, listJson, publicView, withLiveFields } from "./render.js";

/** Read-only top-level fields the SDK may send back on update; accepted and dropped. */
const READ_ONLY = {
  status: z.unknown().optional(),
  events: z.unknown().optional(),
  state: z.unknown().optional(),
  usage: z.unknown().optional(),
  lastUsedAt: z.unknown().optional(),
  expiresIn: z.unknown().optional(),
  nodeGeneration: z.unknown().optional(),
  errors: z.unknown().optional(),
  terminatedAt: z.unknown().optional(),
};

const bodySchemas = new WeakMap<AnyResourceKind, ReturnType<typeof buildBodySchema>>();

/** The create/update body of a kind, built once per kind. */
export function bodySchema(kind: AnyResourceKind) {
  let schema = bodySchemas.get(kind);
  if (!schema) bodySchemas.set(kind, (schema = buildBodySchema(kind)));
  return schema;
}

function buildBodySchema(kind: AnyResourceKind) {
  const metadata = kind.name ? metadataInput.extend({ name: kind.name.optional() }) : metadataInput;
  return z.strictObject({ ...READ_ONLY, ...kind.extra, metadata: metadata.default({}), spec: kind.spec.optional() });
}

export function parentKey(deps: Pick<ResourceDeps, "resources">, kind: AnyResourceKind, ctx: OpContext): string {
  if (!kind.parent) return "";
  const parts = kind.parent.params.map((p) => ctx.params[p]!);
  // The direct parent (the last param) must exist: /vpcs/x/egressgateways needs VPC x.
  const parentName = parts[parts.length - 1]!;
  const grandParent = parts.slice(0, -1).join("/");
  if (!deps.resources.get(ctx.workspace, kind.parent.kind, parentName, grandParent)) throw errors.notFound(`${kind.parent.label} "${parentName}" not found`);
  return parts.join("/");
}

/** Loads an item, settling due status moves (and saving them). */
export function loadItem(
  deps: Pick<ResourceDeps, "resources" | "clock">,
  kind: AnyResourceKind,
  ctx: OpContext,
  name: string,
  parent: string,
): StoredResource<ResourceDoc> {
  const item = deps.resources.get<ResourceDoc>(ctx.workspace, kind.kind, name, parent);
  if (!item) throw errors.notFound(`${kind.kind.replace(/-/g, " ")} "${name}" not found`);
  settleItem(deps, item);
  return item;
}

export function settleItem(deps: Pick<ResourceDeps, "resources" | "clock">, item: StoredResource<ResourceDoc>): void {
  if (settle(item.doc as Deployable, deps.clock.now())) save(deps, item);
}

export function save(deps: Pick<ResourceDeps, "resources">, item: StoredResource<ResourceDoc>): void {
  item.status = item.doc.status ?? "";
  deps.resources.update(item);
}

export function showSecrets(ctx: OpContext): boolean {
  return ctx.isAdmin && queryBool(ctx.query.show_secrets);
}

/** The document as answered; with the request's context, its read-time fields (kind.readFields) too. */
export function renderDoc<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>, doc: ResourceDoc, show: boolean, ctx?: OpContext): ResourceDoc {
  const view = publicView(doc);
  const masked = kind.mask ? kind.mask(view, show) : view;
  const live = ctx && kind.readFields?.(doc, ctx, deps);
  return live ? { ...masked, ...live } : masked;
}

/** Builds a new document from a create body; shared with kinds that add their own create routes. */
export function buildNew<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>, ctx: OpContext, parent: string): ResourceDoc {
  const body = parse(bodySchema(kind), ctx.body ?? {}, "body");
  const name = body.metadata.name ?? kind.generateName?.(ctx, deps);
  if (!name) throw errors.badRequest("metadata.name: required");
  const now = deps.clock.now();
  const doc: ResourceDoc = {
    metadata: newMetadata(body.metadata, name, ctx.workspace, ctx.actor, now),
    spec: (body.spec ?? {}) as Record<string, unknown>,
    __uid: deps.ids(),
  };
  for (const key of Object.keys(kind.extra ?? {})) if ((body as Record<string, unknown>)[key] !== undefined) doc[key] = (body as Record<string, unknown>)[key];
  kind.prepare?.(doc, ctx, deps);
  if (kind.lifecycle === "deployment") {
    const own = kind.deployPlan?.(doc, deps);
    if (own) startPlan(doc as Deployable, own, now, "manual");
    else startPlan(doc as Deployable, spec(doc).enabled === false ? PLANS.deactivate : PLANS.deploy, now, deps.testHooks.transitions);
  }
  if (kind.lifecycle === "synchronous")
    startPlan(doc as Deployable, kind.createPlan ?? ["DEPLOYED"], now, kind.createPlan ? deps.testHooks.transitions : "immediate");
  return doc;
}

export function insertNew(deps: Pick<ResourceDeps, "resources" | "clock">, kind: AnyResourceKind, ctx: OpContext, parent: string, doc: ResourceDoc): void {
  const record = { kind: kind.kind, parent, name: doc.metadata.name, status: doc.status ?? "", doc };
  insertChild(
    deps,
    ctx,
    record,
    () => new ApiError("conflict", `${kind.kind.replace(/-/g, " ")} "${doc.metadata.name}" already exists`, { details: kind.conflictDetails }),
  );
}

/** A record to store in the caller's workspace: under `parent` ("" for none), created now unless `createdMs` says when. */
export interface ChildRecord {
  kind: string;
  parent: string;
  name: string;
  status: string;
  doc: object;
  createdMs?: number;
}

/**
 * Stores a new record of the request's workspace (a preview, an execution, a snapshot, a domain share);
 * throws what `conflict` returns when one of that kind already has the name under that parent.
 */
export function insertChild(deps: Pick<ResourceDeps, "resources" | "clock">, ctx: OpContext, record: ChildRecord, conflict: () => Error): void {
  const { createdMs = deps.clock.now(), ...key } = record;
  if (!deps.resources.tryInsert({ workspace: ctx.workspace, createdMs, ...key })) throw conflict();
}

const spec = (doc: ResourceDoc) => doc.spec as { enabled?: boolean };

export function crudOperations<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>): Operation[] {
  const item = `${kind.collection}/:${kind.param}`;
  const ops: Operation[] = [];
  const { list, create, get, update, delete: del } = kind.ops;
  if (list) {
    ops.push({
      id: list,
      method: "get",
      path: kind.collection,
      scope: scopeFor(kind.scope, "list"),
      handler: (ctx) => {
        kind.beforeRead?.(ctx, deps);
        const parent = parentKey(deps, kind, ctx);
        const statuses = kind.statusFilter ? statusFilter(ctx.query.status) : undefined;
        // e.g. sandboxes: TERMINATED hidden unless ?showTerminated=true; an explicit ?status= wins.
        const hidden = kind.hiddenStatuses && !statuses && !queryBool(ctx.query[kind.hiddenStatuses.shownBy]) ? kind.hiddenStatuses.statuses : undefined;
        const externalId = typeof ctx.query.externalId === "string" && ctx.query.externalId !== "" ? ctx.query.externalId : undefined;
        const keep = externalId ? (row: StoredResource) => (row.doc as ResourceDoc).metadata.externalId === externalId : undefined;
        const show = showSecrets(ctx);
        const variant = show ? "secrets-shown" : "secrets-masked";
        // One instant for the whole page (settleItem reads the clock per item).
        const now = deps.clock.now();
        const list = listResources(
          deps,
          ctx,
          { kind: kind.kind, parent, shape: kind.list, limits: kind.listLimits, statuses, excludeStatuses: hidden, keep, filters: { externalId } },
          (row) => {
            // Due status moves first: settling saves the item, which drops its cached texts.
            if (settle(row.doc as Deployable, now)) save(deps, row as StoredResource<ResourceDoc>);
            const render = () => {
              const doc = renderDoc(deps, kind, row.doc as ResourceDoc, show);
              return kind.listItem ? kind.listItem(doc) : doc;
            };
            // The item's JSON is kept until its next save (it depends only on the document and `show`);
            // read-time fields (they follow the clock) are added to it on each read.
            const live = kind.readFields?.(row.doc as ResourceDoc, ctx, deps);
            const text = withLiveFields(deps.resources.renderedJson(row, variant, render), row.doc as ResourceDoc, live);
            return text ?? JSON.stringify({ ...(render() as object), ...live });
          },
        );
        return listJson(list);
      },
    });
  }
  if (create) {
    ops.push({
      id: create,
      method: "post",
      path: kind.collection,
      scope: scopeFor(kind.scope, "create"),
      handler: (ctx) => {
        const parent = parentKey(deps, kind, ctx);
        const doc = buildNew(deps, kind, ctx, parent);
        const finish = () => {
          insertNew(deps, kind, ctx, parent, doc); // a name taken while provisioning still answers 409
          kind.afterWrite?.(doc, ctx, deps);
          return renderDoc(deps, kind, doc, false, ctx);
        };
        // Synchronous unless the kind provisions something: callers of a kind without it get a value, not a promise.
        return kind.provision ? kind.provision(doc, ctx, deps).then(finish) : finish();
      },
    });
  }
  if (get) {
    ops.push({
      id: get,
      method: "get",
      path: item,
      scope: scopeFor(kind.scope, "get"),
      alsoGrantedBy: kind.itemTokenScope ? (params) => `${kind.itemTokenScope}:${params[kind.param]}` : undefined,
      handler: (ctx) => {
        kind.beforeRead?.(ctx, deps, ctx.params[kind.param]!);
        const found = loadItem(deps, kind, ctx, ctx.params[kind.param]!, parentKey(deps, kind, ctx));
        const show = showSecrets(ctx);
        // The document's JSON is kept until its next save, like a list item's (the "get" variants keep the events
        // a list item drops); read-time fields (they follow the clock) are added to it on each read.
        const live = kind.readFields?.(found.doc, ctx, deps);
        const render = () => renderDoc(deps, kind, found.doc, show);
        const text = withLiveFields(deps.resources.renderedJson(found, show ? "get-secrets-shown" : "get-secrets-masked", render), found.doc, live);
        return text === undefined ? { ...render(), ...live } : new RawJson(text);
      },
    });
  }
  if (update) {
    ops.push({
      id: update,
      method: "put",
      path: item,
      scope: scopeFor(kind.scope, kind.scope === "volumeTemplates" ? "upsert" : "update"),
      handler: (ctx) => {
        const found = loadItem(deps, kind, ctx, ctx.params[kind.param]!, parentKey(deps, kind, ctx));
        const body = parse(bodySchema(kind), ctx.body ?? {}, "body");
        if (body.metadata.name !== undefined && body.metadata.name !== found.name)
          throw errors.badRequest("metadata.name: cannot be changed (names are immutable)");
        const now = deps.clock.now();
        const previous = found.doc;
        const doc: ResourceDoc = {
          ...previous,
          metadata: updatedMetadata(previous.metadata, body.metadata, ctx.actor, now),
          spec: (body.spec ?? previous.spec) as Record<string, unknown>,
        };
        for (const key of Object.keys(kind.extra ?? {}))
          if ((body as Record<string, unknown>)[key] !== undefined) doc[key] = (body as Record<string, unknown>)[key];
        keepMaskedSecrets(doc.spec, previous.spec);
        kind.prepare?.(doc, ctx, deps, previous);
        const finish = () => {
          if (kind.lifecycle === "deployment") {
            (doc as Deployable).__revision = ((previous as Deployable).__revision ?? 1) + 1;
            const own = kind.deployPlan?.(doc, deps, previous);
            if (own) startPlan(doc as Deployable, own, now, "manual");
            else startPlan(doc as Deployable, spec(doc).enabled === false ? PLANS.deactivate : PLANS.redeploy, now, deps.testHooks.transitions);
          }
          found.doc = doc;
          save(deps, found);
          kind.afterWrite?.(doc, ctx, deps, previous);
          return renderDoc(deps, kind, doc, false, ctx);
        };
        if (!kind.provision) return finish(); // synchronous: the sandbox runtimes call this handler directly
        return kind.provision(doc, ctx, deps, previous).then(() => {
          loadItem(deps, kind, ctx, found.name, parentKey(deps, kind, ctx)); // deleted meanwhile: 404, not brought back
          return finish();
        });
      },
    });
  }
  if (del) {
    ops.push({
      id: del,
      method: "delete",
      path: item,
      scope: scopeFor(kind.scope, "delete"),
      handler: (ctx) => {
        const parent = parentKey(deps, kind, ctx);
        const found = loadItem(deps, kind, ctx, ctx.params[kind.param]!, parent);
        const finish = () => {
          deps.db.transaction(() => {
            deps.resources.delete(ctx.workspace, kind.kind, found.name, parent);
            if (kind.children?.length) deps.resources.deleteChildren(ctx.workspace, kind.children, parent ? `${parent}/${found.name}` : found.name);
          })();
          if (kind.lifecycle !== "none") forceStatus(found.doc as Deployable, "DELETING", deps.clock.now(), "deleting");
          const rendered = renderDoc(deps, kind, found.doc, false);
          return kind.deleteReply ? kind.deleteReply(rendered) : rendered;
        };
        // A check that must ask the sandboxes' agents (drives: mounted anywhere?) answers later.
        const check = kind.beforeDelete?.(found, ctx, deps);
        return check instanceof Promise ? check.then(finish) : finish();
      },
    });
  }
  return ops;
}

/** `?status=` values, comma-separated; unknown values are a 400 on every version. */
export function statusFilter(value: unknown): string[] | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  const statuses = value.split(",").map((s) => s.trim().toUpperCase());
  const bad = statuses.find((s) => !(DEPLOYMENT_STATUSES as readonly string[]).includes(s));
  if (bad) throw errors.badRequest(`query.status: unknown status "${bad}"`);
  return statuses;
}
