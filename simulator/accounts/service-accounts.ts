import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { randomToken } from "../../src/ids.js";
import { parseDuration } from "../../src/units.js";
import { toIso as iso } from "../../src/clock.js";
import { digest, type ApiKeyRow, type ServiceAccountRow } from "../auth/credentials.js";
import type { Operation, OpContext } from "../http/operation.js";
import type { SimClock } from "../clock.js";
import type { Ids } from "../../src/ids.js";
import type { CredentialStore } from "../auth/credentials.js";

/**
 * Service accounts and their API keys. These objects are snake_case on the
 * wire (client_id, created_at, expires_in), unlike everything else
 * (control-plane.md §3.12); the secret and the key value appear only on create.
 */
const SaBody = z.strictObject({ name: z.string().min(1).max(63), description: z.string().max(500).optional() });
const SaUpdate = z.strictObject({ name: z.string().min(1).max(63).optional(), description: z.string().max(500).optional() });
const KeyBody = z.strictObject({ name: z.string().max(63).optional(), expires_in: z.string().optional() });

const renderSa = (sa: ServiceAccountRow) => ({
  client_id: sa.client_id,
  name: sa.name,
  description: sa.description,
  created_at: sa.created_at,
  updated_at: sa.updated_at,
});

export function renderApiKey(key: ApiKeyRow, value?: string) {
  return {
    id: key.id,
    name: key.name,
    ...(value ? { apiKey: value } : {}),
    ...(key.expires_in ? { expires_in: key.expires_in } : {}),
    sub: key.sub,
    sub_type: key.sub_type,
    createdAt: key.created_at,
    updatedAt: key.created_at,
    createdBy: key.created_by,
    updatedBy: key.created_by,
  };
}

/** "30d", "24h", "1w" (weeks accepted here as the docs show them); at most 10 years. */
export function expiresInMs(value: string): number {
  const weeks = /^(\d+)w$/.exec(value);
  let ms: number;
  try {
    ms = weeks ? Number(weeks[1]) * 7 * 86_400_000 : parseDuration(value, ["s", "m", "h", "d"]);
  } catch (e) {
    throw errors.badRequest(`expires_in: ${(e as Error).message}`);
  }
  if (ms > 10 * 366 * 86_400_000) throw errors.badRequest("expires_in: at most 10 years");
  return ms;
}

/** Service accounts and their API keys live in the credential store. */
export interface ServiceAccountDeps {
  credentials: CredentialStore;
  clock: SimClock;
  ids: Ids;
}

function requireAdmin(ctx: OpContext): void {
  if (!ctx.isAdmin) throw errors.forbidden("only a workspace admin may manage service accounts");
}

function loadSa(deps: ServiceAccountDeps, ctx: OpContext): ServiceAccountRow {
  const sa = deps.credentials.serviceAccount(ctx.params.clientId!);
  if (!sa || sa.workspace !== ctx.workspace) throw errors.notFound(`service account "${ctx.params.clientId}" not found`);
  return sa;
}

export function createApiKey(deps: ServiceAccountDeps, ctx: OpContext, sub: string, subType: ApiKeyRow["sub_type"], body: z.infer<typeof KeyBody>) {
  const now = deps.clock.now();
  const value = `sim_${randomToken(24)}`;
  const row: ApiKeyRow = {
    id: deps.ids(),
    key_hash: digest(value),
    name: body.name ?? "",
    sub,
    sub_type: subType,
    expires_in: body.expires_in ?? null,
    expires_ms: body.expires_in ? now + expiresInMs(body.expires_in) : null,
    created_at: iso(now),
    created_by: ctx.actor,
  };
  deps.credentials.insertApiKey(row);
  return renderApiKey(row, value);
}

export function serviceAccountOperations(deps: ServiceAccountDeps): Operation[] {
  return [
    {
      id: "getWorkspaceServiceAccounts",
      method: "get",
      path: "/service_accounts",
      scope: "apiKey:list",
      handler: (ctx) => deps.credentials.serviceAccountsOf(ctx.workspace).map(renderSa),
    },
    {
      id: "createWorkspaceServiceAccount",
      method: "post",
      path: "/service_accounts",
      scope: "admin",
      handler: (ctx) => {
        requireAdmin(ctx);
        const body = parse(SaBody, ctx.body ?? {}, "body");
        const now = iso(deps.clock.now());
        const secret = randomToken(32);
        const row: ServiceAccountRow = {
          client_id: deps.ids(),
          workspace: ctx.workspace,
          name: body.name,
          description: body.description ?? "",
          secret_hash: digest(secret),
          created_at: now,
          updated_at: now,
        };
        deps.credentials.insertServiceAccount(row);
        return { ...renderSa(row), client_secret: secret };
      },
    },
    {
      id: "updateWorkspaceServiceAccount",
      method: "put",
      path: "/service_accounts/:clientId",
      scope: "admin",
      handler: (ctx) => {
        requireAdmin(ctx);
        const sa = loadSa(deps, ctx);
        const body = parse(SaUpdate, ctx.body ?? {}, "body");
        const next = { ...sa, name: body.name ?? sa.name, description: body.description ?? sa.description, updated_at: iso(deps.clock.now()) };
        deps.credentials.updateServiceAccount(next);
        return renderSa(next);
      },
    },
    {
      id: "deleteWorkspaceServiceAccount",
      method: "delete",
      path: "/service_accounts/:clientId",
      scope: "admin",
      handler: (ctx) => {
        requireAdmin(ctx);
        const sa = loadSa(deps, ctx);
        // Secret, API keys, refresh tokens and access tokens stop working at once.
        deps.credentials.deleteServiceAccount(sa.client_id);
        return renderSa(sa);
      },
    },
    {
      id: "listApiKeysForServiceAccount",
      method: "get",
      path: "/service_accounts/:clientId/api_keys",
      scope: "apiKey:list",
      handler: (ctx) => deps.credentials.apiKeysOf(loadSa(deps, ctx).client_id).map((k) => renderApiKey(k)),
    },
    {
      id: "createApiKeyForServiceAccount",
      method: "post",
      path: "/service_accounts/:clientId/api_keys",
      scope: "admin",
      handler: (ctx) => {
        requireAdmin(ctx);
        return createApiKey(deps, ctx, loadSa(deps, ctx).client_id, "service_account", parse(KeyBody, ctx.body ?? {}, "body"));
      },
    },
    {
      id: "deleteApiKeyForServiceAccount",
      method: "delete",
      path: "/service_accounts/:clientId/api_keys/:apiKeyId",
      scope: "apiKey:write",
      handler: (ctx) => {
        requireAdmin(ctx);
        const sa = loadSa(deps, ctx);
        if (!deps.credentials.deleteApiKey(sa.client_id, ctx.params.apiKeyId!)) throw errors.notFound(`API key "${ctx.params.apiKeyId}" not found`);
        return { message: `API key ${ctx.params.apiKeyId} deleted` };
      },
    },
  ];
}
