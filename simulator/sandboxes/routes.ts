import { randomBytes } from "node:crypto";
import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import { secretsEqual } from "../../src/auth.js";
import { scopeFor } from "../auth/scopes.js";
import { parse, queryBool } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { bodySchema, buildNew, insertNew, loadItem, renderDoc, showSecrets } from "../resources/crud.js";
import { previewKind, previewTokenKind, sandboxCreateAnswer, sandboxKind } from "./kind.js";
import type { SandboxResourceDeps } from "./runtime.js";
import type { ImageUploads } from "./image-uploads.js";

/**
 * Sandbox operations beyond generic CRUD: create (SandboxError, createIfNotExist), update, archive, previews,
 * tokens. What runs behind the records (nothing, or real agents) is the SandboxRuntime the root chose.
 */

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

/**
 * The top-level fields an update takes; the platform ignores the others. The SDK's own lifecycle test
 * sends the current spec spread beside `metadata` and `spec` (`{...sandbox.spec, metadata, spec}`), so
 * `runtime`, `region`... arrive at the top level too. `spec` itself stays strict.
 */
const UPDATE_FIELDS = new Set(Object.keys(bodySchema(sandboxKind).shape));

function withoutIgnoredFields(ctx: OpContext): OpContext {
  const body = ctx.body;
  if (body && typeof body === "object" && !Array.isArray(body)) ctx.body = Object.fromEntries(Object.entries(body).filter(([key]) => UPDATE_FIELDS.has(key)));
  return ctx;
}

const TokenBody = z.strictObject({
  metadata: z.looseObject({ name: z.string().optional() }).optional(),
  spec: z.strictObject({ expiresAt: z.iso.datetime({ offset: true }).optional(), token: z.string().optional(), expired: z.boolean().optional() }).optional(),
});

/**
 * `uploads`: the image builds of uploaded contexts (`?upload=true`, simulator/images/uploads.ts), where the
 * simulator has an image store.
 */
export function sandboxOperations(deps: SandboxResourceDeps, uploads: ImageUploads): Operation[] {
  const upload = (ctx: OpContext) => {
    if (!queryBool(ctx.query.upload)) return undefined;
    return uploads;
  };
  return [
    {
      id: "createSandbox",
      method: "post",
      path: "/sandboxes",
      scope: "sandboxes:create",
      handler: (ctx) => {
        const uploaded = upload(ctx)?.create(deps, ctx);
        if (uploaded) return uploaded;
        // A new sandbox's answer echoes its routing secrets as sent; an existing one answered (createIfNotExist) is read as a GET.
        const name = (ctx.body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
        const prior =
          typeof name === "string"
            ? deps.resources.get<{ metadata: { createdAt?: unknown } }>(ctx.workspace, "sandbox", name)?.doc.metadata.createdAt
            : undefined;
        const answer = (doc: unknown) =>
          prior !== undefined && (doc as { metadata?: { createdAt?: unknown } }).metadata?.createdAt === prior ? doc : sandboxCreateAnswer(doc, ctx.body);
        const created = deps.sandboxes.create(ctx);
        return created instanceof Promise ? created.then(answer) : answer(created);
      },
      errorShape: sandboxError,
    },
    {
      id: "getSandboxByExternalId",
      method: "get",
      path: "/sandboxes/by-external-id/:externalId",
      scope: "sandboxes:get",
      handler: (ctx) => {
        const found = deps.resources
          .list({ workspace: ctx.workspace, kind: "sandbox", sort: "createdAt:desc" })
          .find((i) => (i.doc as { metadata?: { externalId?: string } }).metadata?.externalId === ctx.params.externalId);
        if (!found) throw errors.notFound(`no sandbox with externalId "${ctx.params.externalId}"`);
        return renderDoc(deps, sandboxKind, loadItem(deps, sandboxKind, ctx, found.name, "").doc, showSecrets(ctx), ctx);
      },
    },
    {
      id: "updateSandbox",
      method: "put",
      path: "/sandboxes/:sandboxName",
      scope: scopeFor("sandboxes", "update"), // the generic update's
      handler: (ctx) => upload(ctx)?.update(deps, ctx) ?? deps.sandboxes.update(withoutIgnoredFields(ctx)),
    },
    {
      id: "archiveSandbox",
      method: "post",
      path: "/sandboxes/:sandboxName/archive",
      scope: "sandboxes:control",
      handler: (ctx) => deps.sandboxes.move(ctx, "archive"),
    },
    {
      id: "unarchiveSandbox",
      method: "post",
      path: "/sandboxes/:sandboxName/unarchive",
      scope: "sandboxes:control",
      handler: (ctx) => deps.sandboxes.move(ctx, "unarchive"),
    },
    {
      id: "createSandboxPreview",
      method: "post",
      path: "/sandboxes/:sandboxName/previews",
      scope: "sandboxes:update",
      handler: (ctx) => {
        loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "");
        const doc = buildNew(deps, previewKind, ctx, ctx.params.sandboxName!);
        // ?force=true replaces an existing preview of the same name.
        if (queryBool(ctx.query.force)) deps.resources.delete(ctx.workspace, "preview", doc.metadata.name, ctx.params.sandboxName!);
        insertNew(deps, previewKind, ctx, ctx.params.sandboxName!, doc);
        return renderDoc(deps, previewKind, doc, false);
      },
    },
    {
      id: "createSandboxPreviewToken",
      method: "post",
      path: "/sandboxes/:sandboxName/previews/:previewName/tokens",
      scope: "sandboxes:update",
      handler: (ctx) => {
        loadItem(deps, previewKind, ctx, ctx.params.previewName!, ctx.params.sandboxName!);
        const body = parse(TokenBody, ctx.body ?? {}, "body");
        const now = deps.clock.now();
        // Every token gets its own id: the SDK names them "token-" + Date.now(), which collides within a millisecond.
        const name = `token-${randomBytes(8).toString("hex")}`;
        const expiresAt = body.spec?.expiresAt ?? iso(now + 24 * 3_600_000);
        const doc = {
          metadata: {
            name,
            previewName: ctx.params.previewName!,
            resourceName: ctx.params.sandboxName!,
            resourceType: "sandbox",
            workspace: ctx.workspace,
            createdAt: iso(now),
            updatedAt: iso(now),
            createdBy: ctx.actor,
            updatedBy: ctx.actor,
            displayName: body.metadata?.name ?? name,
            labels: {},
          },
          spec: { token: randomBytes(24).toString("base64url"), expiresAt, expired: Date.parse(expiresAt) <= now },
        };
        insertNew(deps, previewTokenKind, ctx, `${ctx.params.sandboxName}/${ctx.params.previewName}`, doc);
        return doc;
      },
    },
    {
      // By the token's id (metadata.name) or by its value (what SandboxPreviewToken.value hands a program).
      id: "deleteSandboxPreviewToken",
      method: "delete",
      path: "/sandboxes/:sandboxName/previews/:previewName/tokens/:tokenName",
      scope: scopeFor("sandboxes", "delete"),
      handler: (ctx) => {
        loadItem(deps, previewKind, ctx, ctx.params.previewName!, ctx.params.sandboxName!);
        const parent = `${ctx.params.sandboxName}/${ctx.params.previewName}`;
        const given = ctx.params.tokenName!;
        const byName = deps.resources.get(ctx.workspace, "preview-token", given, parent);
        const found =
          byName ??
          deps.resources
            .list<{ spec: { token?: string } }>({ workspace: ctx.workspace, kind: "preview-token", parent, sort: "createdAt:asc" })
            .find((t) => t.doc.spec.token !== undefined && secretsEqual(t.doc.spec.token, given));
        if (!found) throw errors.notFound(`preview token "${given.length > 24 ? `${given.slice(0, 6)}…` : given}" not found`);
        deps.resources.delete(ctx.workspace, "preview-token", found.name, parent);
        return { message: `preview token ${found.name} deleted` };
      },
    },
  ];
}
