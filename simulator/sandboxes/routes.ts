import { randomBytes } from "node:crypto";
import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import { secretsEqual } from "../../src/auth.js";
import { scopeFor } from "../auth/scopes.js";
import { parse, queryBool } from "../../src/http.js";
import { iso } from "../clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { bodySchema, buildNew, crudOperations, insertNew, loadItem, renderDoc, save, showSecrets } from "../resources/crud.js";
import { PLANS, startPlan, type Deployable } from "../resources/lifecycle.js";
import type { ResourceDoc } from "../resources/kind.js";
import { previewKind, previewTokenKind, sandboxKind } from "../resources/kinds/sandbox.js";
import { afterUpdate, archive, awaitCreated, launchOptions, markDeploying, unarchive } from "./agent-lifecycle.js";
import { dropTerminated } from "./expiry.js";

/** Sandbox operations beyond generic CRUD: create (SandboxError, createIfNotExist), update, archive, previews, tokens. */

const NOT_REUSABLE = new Set(["FAILED", "TERMINATED", "TERMINATING"]);

/** POST /sandboxes answers errors in the SandboxError shape (control-plane.md §6): string `code`, `status_code`. */
function sandboxError(err: ApiError, req: { body?: unknown; headers: Record<string, unknown> }): ApiError {
  const name = (req.body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
  const code = typeof err.details?.code === "string" ? err.details.code : err.code.toUpperCase();
  return new ApiError(err.code, err.message, {
    status: err.status,
    headers: err.headers,
    details: { ...err.details, code, status_code: err.status, sandbox_name: typeof name === "string" ? name : undefined, timestamp: new Date().toISOString() },
  });
}

/** spec.runtime.image of a request body, as sent. */
const imageOf = (body: unknown) => (body as { spec?: { runtime?: { image?: unknown } } } | undefined)?.spec?.runtime?.image;

async function createSandbox(ctx: OpContext): Promise<unknown> {
  const agents = ctx.deps.agents;
  if (!agents) return createRecord(ctx);
  // An image no source provides: 400 INVALID_IMAGE before any record exists, as the platform answers (no sandbox left behind).
  const image = imageOf(ctx.body);
  await ctx.deps.images?.check(typeof image === "string" ? image : undefined);
  // Real sandboxes (issue 7): DEPLOYING until the sandbox's agent answers /health; the reply waits for DEPLOYED.
  const doc = createRecord(ctx) as { metadata: { name: string } };
  return withinCreateWait(awaitCreated(ctx, agents, doc.metadata.name), doc.metadata.name);
}

/**
 * A create that outlasts CREATE_WAIT_MS (an image built on first use) answers
 * 504 while the sandbox keeps deploying, as the platform's edge does: the SDK
 * then polls GET /sandboxes/{name} until DEPLOYED or FAILED (sandbox.js,
 * waitAfterCreateGatewayTimeout). Node's fetch would give up on its own at
 * 300 s without response headers.
 */
export const CREATE_WAIT_MS = 240_000;

export function withinCreateWait<T>(created: Promise<T>, name: string, waitMs = CREATE_WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ApiError("service_unavailable", `sandbox "${name}" is still deploying (its image is being built): GET it until it is DEPLOYED`, { status: 504, details: { code: "GATEWAY_TIMEOUT" } })), waitMs);
    timer.unref();
  });
  created.catch(() => {}); // settled after the 504: its outcome is in the sandbox's status and events
  return Promise.race([created, timeout]).finally(() => clearTimeout(timer));
}

function createRecord(ctx: OpContext): unknown {
  const doc = buildNew(sandboxKind, ctx, "");
  dropTerminated(ctx.deps, ctx.workspace, doc.metadata.name);
  if (queryBool(ctx.query.createIfNotExist)) {
    const existing = ctx.deps.resources.get(ctx.workspace, "sandbox", doc.metadata.name);
    if (existing && !NOT_REUSABLE.has(existing.status)) {
      const item = loadItem(sandboxKind, ctx, doc.metadata.name, "");
      // Brings back the agent of a sandbox that should have one (no-op while it runs or starts).
      if (ctx.deps.agents && (item.status === "DEPLOYED" || item.status === "DEPLOYING")) ctx.deps.agents.begin(ctx.workspace, doc.metadata.name, launchOptions(item.doc));
      return renderDoc(sandboxKind, item.doc, false, ctx);
    }
  }
  if (ctx.deps.agents) markDeploying(ctx, doc);
  insertNew(sandboxKind, ctx, "", doc);
  // A real sandbox-agent (issue 7): started now; calls through metadata.url wait until it is healthy.
  ctx.deps.agents?.begin(ctx.workspace, doc.metadata.name, launchOptions(doc));
  return renderDoc(sandboxKind, doc, false, ctx);
}

/** The generic update (validation, masked secrets kept), then what the new spec means for the agent. */
const genericUpdate = crudOperations({ ...sandboxKind, ops: { update: "updateSandbox" } })[0]!;

/**
 * The top-level fields an update takes; the platform ignores the others. The SDK's own lifecycle test
 * sends the current spec spread beside `metadata` and `spec` (`{...sandbox.spec, metadata, spec}`), so
 * `runtime`, `region`... arrive at the top level too. `spec` itself stays strict.
 */
const UPDATE_FIELDS = new Set(Object.keys(bodySchema(sandboxKind).shape));

function withoutIgnoredFields(body: unknown): unknown {
  if (!body || typeof body !== "object" || Array.isArray(body)) return body;
  return Object.fromEntries(Object.entries(body).filter(([key]) => UPDATE_FIELDS.has(key)));
}

async function updateSandbox(ctx: OpContext): Promise<unknown> {
  ctx.body = withoutIgnoredFields(ctx.body);
  const agents = ctx.deps.agents;
  if (!agents) return genericUpdate.handler(ctx);
  // Read before the update: the store may hand the update the same (cached) item object.
  const { name, doc, status } = loadItem(sandboxKind, ctx, ctx.params.sandboxName!, "");
  const image = imageOf(ctx.body);
  // A new image must exist (the default error shape here: numeric code, the reason in the message).
  if (typeof image === "string" && image !== launchOptions(doc).image) {
    await ctx.deps.images?.check(image).catch((err: unknown) => {
      throw err instanceof ApiError ? errors.badRequest(`INVALID_IMAGE: ${err.message}`) : err;
    });
  }
  genericUpdate.handler(ctx);
  // A new spec.network applies to the running sandbox at once (simulator/egress): no restart.
  await agents.applyNetwork(ctx.workspace, name);
  return afterUpdate(ctx, agents, name, doc, status);
}

function moveSandbox(ctx: OpContext, plan: "archive" | "unarchive"): unknown {
  const agents = ctx.deps.agents;
  if (agents) return plan === "archive" ? archive(ctx, agents, ctx.params.sandboxName!) : unarchive(ctx, agents, ctx.params.sandboxName!);
  const item = loadItem(sandboxKind, ctx, ctx.params.sandboxName!, "");
  const allowed = plan === "archive" ? ["DEPLOYED", "DEACTIVATED"] : ["ARCHIVED"];
  if (!allowed.includes(item.status)) throw errors.conflict(`sandbox "${item.name}" is ${item.status}; ${plan} needs ${allowed.join(" or ")}`);
  startPlan(item.doc as Deployable, PLANS[plan], ctx.deps.clock.now(), ctx.deps.testHooks.transitions);
  save(ctx, item);
  return renderDoc(sandboxKind, item.doc, false, ctx);
}

const TokenBody = z.strictObject({
  metadata: z.looseObject({ name: z.string().optional() }).optional(),
  spec: z.strictObject({ expiresAt: z.iso.datetime({ offset: true }).optional(), token: z.string().optional(), expired: z.boolean().optional() }).optional(),
});

export const sandboxOperations: Operation[] = [
  { id: "createSandbox", method: "post", path: "/sandboxes", scope: "sandboxes:create", handler: createSandbox, errorShape: sandboxError },
  {
    id: "getSandboxByExternalId", method: "get", path: "/sandboxes/by-external-id/:externalId", scope: "sandboxes:get",
    handler: (ctx) => {
      const found = ctx.deps.resources.list({ workspace: ctx.workspace, kind: "sandbox", sort: "createdAt:desc" }).find((i) => (i.doc as { metadata?: { externalId?: string } }).metadata?.externalId === ctx.params.externalId);
      if (!found) throw errors.notFound(`no sandbox with externalId "${ctx.params.externalId}"`);
      return renderDoc(sandboxKind, loadItem(sandboxKind, ctx, found.name, "").doc, showSecrets(ctx), ctx);
    },
  },
  { id: "updateSandbox", method: "put", path: "/sandboxes/:sandboxName", scope: genericUpdate.scope, handler: updateSandbox },
  { id: "archiveSandbox", method: "post", path: "/sandboxes/:sandboxName/archive", scope: "sandboxes:control", handler: (ctx) => moveSandbox(ctx, "archive") },
  { id: "unarchiveSandbox", method: "post", path: "/sandboxes/:sandboxName/unarchive", scope: "sandboxes:control", handler: (ctx) => moveSandbox(ctx, "unarchive") },
  {
    id: "createSandboxPreview", method: "post", path: "/sandboxes/:sandboxName/previews", scope: "sandboxes:update",
    handler: (ctx) => {
      loadItem(sandboxKind, ctx, ctx.params.sandboxName!, "");
      const doc = buildNew(previewKind, ctx, ctx.params.sandboxName!);
      // ?force=true replaces an existing preview of the same name.
      if (queryBool(ctx.query.force)) ctx.deps.resources.delete(ctx.workspace, "preview", doc.metadata.name, ctx.params.sandboxName!);
      insertNew(previewKind, ctx, ctx.params.sandboxName!, doc);
      return renderDoc(previewKind, doc, false);
    },
  },
  {
    id: "createSandboxPreviewToken", method: "post", path: "/sandboxes/:sandboxName/previews/:previewName/tokens", scope: "sandboxes:update",
    handler: (ctx) => {
      loadItem(previewKind, ctx, ctx.params.previewName!, ctx.params.sandboxName!);
      const body = parse(TokenBody, ctx.body ?? {}, "body");
      const now = ctx.deps.clock.now();
      // Every token gets its own id: the SDK names them "token-" + Date.now(), which collides within a millisecond.
      const name = `token-${randomBytes(8).toString("hex")}`;
      const expiresAt = body.spec?.expiresAt ?? iso(now + 24 * 3_600_000);
      const doc = {
        metadata: { name, previewName: ctx.params.previewName!, resourceName: ctx.params.sandboxName!, resourceType: "sandbox", workspace: ctx.workspace, createdAt: iso(now), updatedAt: iso(now), createdBy: ctx.actor, updatedBy: ctx.actor, displayName: body.metadata?.name ?? name, labels: {} },
        spec: { token: randomBytes(24).toString("base64url"), expiresAt, expired: Date.parse(expiresAt) <= now },
      };
      insertNew(previewTokenKind, ctx, `${ctx.params.sandboxName}/${ctx.params.previewName}`, doc);
      return doc;
    },
  },
  {
    // By the token's id (metadata.name) or by its value (what SandboxPreviewToken.value hands a program).
    id: "deleteSandboxPreviewToken", method: "delete", path: "/sandboxes/:sandboxName/previews/:previewName/tokens/:tokenName", scope: scopeFor("sandboxes", "delete"),
    handler: (ctx) => {
      loadItem(previewKind, ctx, ctx.params.previewName!, ctx.params.sandboxName!);
      const parent = `${ctx.params.sandboxName}/${ctx.params.previewName}`;
      const given = ctx.params.tokenName!;
      const byName = ctx.deps.resources.get(ctx.workspace, "preview-token", given, parent);
      const found = byName ?? ctx.deps.resources.list<{ spec: { token?: string } }>({ workspace: ctx.workspace, kind: "preview-token", parent, sort: "createdAt:asc" }).find((t) => t.doc.spec.token !== undefined && secretsEqual(t.doc.spec.token, given));
      if (!found) throw errors.notFound(`preview token "${given.length > 24 ? `${given.slice(0, 6)}…` : given}" not found`);
      ctx.deps.resources.delete(ctx.workspace, "preview-token", found.name, parent);
      return { message: `preview token ${found.name} deleted` };
    },
  },
];
