import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { nameSchema } from "../resources/metadata.js";
import { checkAvailability } from "./availability.js";
import { createWorkspace } from "./seed.js";
import type { ResourceStore } from "../store/resources.js";
import type { Logger } from "../../src/logging.js";
import type { SimClock } from "../clock.js";
import type { WorkspaceSandboxRetirement } from "../sandboxes/runtime.js";
import type { JobExecutor } from "../jobs/executor.js";
import type { ApplicationWorkloads } from "../applications/workloads.js";
import type { Ids } from "../../src/ids.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { AccountStore } from "../store/accounts.js";

/** What the workspace and account routes use; a workspace's deletion stops its sandboxes and job tasks and ends its usage. */
export interface AccountRouteDeps {
  accounts: AccountStore;
  resources: ResourceStore;
  clock: SimClock;
  ids: Ids;
  jobs: JobExecutor;
  applications: Pick<ApplicationWorkloads, "stopWorkspace">;
  sandboxes: WorkspaceSandboxRetirement;
  logger: Logger;
  meter: UsageMeter;
}

/** Workspaces (+availability), accounts, users and feature flags. */

const WorkspaceBody = z.strictObject({
  name: nameSchema.optional(),
  displayName: z.string().max(63).optional(),
  accountId: z.string().optional(),
  region: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  runtime: z.looseObject({}).optional(),
  // read-only fields the SDK may send back
  id: z.string().optional(),
  status: z.string().optional(),
  statusReason: z.string().optional(),
  hipaaInfo: z.unknown().optional(),
  groupMappings: z.unknown().optional(),
  resourceCounts: z.unknown().optional(),
  createdAt: z.string().optional(),
  updatedAt: z.string().optional(),
  createdBy: z.string().optional(),
  updatedBy: z.string().optional(),
});

/** Feature flags of every workspace; GET /features lists only the enabled ones. */
export const FEATURE_FLAGS: Record<string, boolean> = {
  sandbox_schedules: true,
  sandbox_previews: true,
  egress_gateways: true,
  image_sharing: true,
  api_pagination: true,
  gpu_flavors: false,
  hipaa_mode: false,
};

const usesSeedSpelling = (ctx: OpContext) =>
  ["x-service-workspace", "x-service-authorization", "service-version"].some((h) => ctx.req.headers[h] !== undefined);

function visibleWorkspace(deps: AccountRouteDeps, ctx: OpContext, name: string) {
  const ws = deps.accounts.workspace(name);
  if (!ws || !ctx.principal.workspaces.has(name)) throw errors.notFound(`workspace "${name}" not found`);
  return ws;
}

function withCounts(deps: AccountRouteDeps, ctx: OpContext, doc: Record<string, unknown>): Record<string, unknown> {
  if (!queryBool(ctx.query.countResources)) return doc;
  const counts: Record<string, number> = {};
  for (const kind of ["agent", "function", "job", "model", "sandbox", "volume", "drive", "policy", "application"])
    counts[kind] = deps.resources.count(String(doc.name), kind);
  return { ...doc, resourceCounts: counts };
}

export function accountOperations(deps: AccountRouteDeps): Operation[] {
  return [
    {
      id: "checkWorkspaceAvailability",
      method: "post",
      path: "/workspaces/availability",
      scope: "workspaces:create",
      level: "account",
      handler: (ctx) => {
        const { name } = parse(z.object({ name: z.string().min(1, "required") }), ctx.body ?? {}, "body");
        const result = checkAvailability(deps.accounts, name, usesSeedSpelling(ctx));
        return queryBool(ctx.query.withReason) ? result : result.available;
      },
    },
    {
      id: "listWorkspaces",
      method: "get",
      path: "/workspaces",
      level: "account",
      scope: "workspaces:list",
      handler: (ctx) => [...ctx.principal.workspaces.keys()].map((n) => deps.accounts.workspace(n)?.doc).filter(Boolean),
    },
    {
      id: "createWorkspace",
      method: "post",
      path: "/workspaces",
      level: "account",
      scope: "workspaces:create",
      handler: (ctx) => {
        const body = parse(WorkspaceBody, ctx.body ?? {}, "body");
        if (!body.name) throw errors.badRequest("body.name: required");
        const accountId = body.accountId ?? ctx.principal.accountId;
        if (!ctx.principal.accountAdmin || accountId !== ctx.principal.accountId)
          throw errors.forbidden("only an admin of the account may create its workspaces");
        const availability = checkAvailability(deps.accounts, body.name, usesSeedSpelling(ctx));
        if (availability.reason === "taken") throw errors.conflict(availability.message);
        if (!availability.available) throw errors.badRequest(`name: ${availability.message} (${availability.reason})`);
        return createWorkspace(deps, {
          name: body.name,
          accountId,
          displayName: body.displayName,
          labels: body.labels,
          region: body.region,
          createdBy: ctx.actor,
        });
      },
    },
    {
      id: "getWorkspace",
      method: "get",
      path: "/workspaces/:workspaceName",
      level: "account",
      scope: "workspaces:get",
      handler: (ctx) => withCounts(deps, ctx, visibleWorkspace(deps, ctx, ctx.params.workspaceName!).doc),
    },
    {
      id: "updateWorkspace",
      method: "put",
      path: "/workspaces/:workspaceName",
      level: "account",
      scope: "workspaces:update",
      handler: (ctx) => {
        const ws = visibleWorkspace(deps, ctx, ctx.params.workspaceName!);
        if (ctx.principal.workspaces.get(ws.name) !== "admin") throw errors.forbidden(`only an admin of workspace "${ws.name}" may update it`);
        const body = parse(WorkspaceBody, ctx.body ?? {}, "body");
        if (body.name !== undefined && body.name !== ws.name) throw errors.badRequest("name: cannot be changed");
        const doc = {
          ...ws.doc,
          ...(body.displayName !== undefined && { displayName: body.displayName }),
          ...(body.labels && { labels: body.labels }),
          ...(body.region && { region: body.region }),
          ...(body.runtime && { runtime: body.runtime }),
          updatedAt: iso(deps.clock.now()),
          updatedBy: ctx.actor,
        };
        deps.accounts.updateWorkspace(ws.name, doc);
        return doc;
      },
    },
    {
      id: "deleteWorkspace",
      method: "delete",
      path: "/workspaces/:workspaceName",
      level: "account",
      scope: "workspaces:delete",
      handler: (ctx) => {
        const ws = visibleWorkspace(deps, ctx, ctx.params.workspaceName!);
        if (!ctx.principal.accountAdmin || ws.accountId !== ctx.principal.accountId)
          throw errors.forbidden("only an admin of the account may delete its workspaces");
        // Its sandboxes' agents are stopped and their files retired (--sandbox-retention), its drives removed.
        const sandboxes = deps.resources
          .allOfKind(ws.name, ["sandbox"])
          .filter((i) => i.parent === "")
          .map((i) => i.name);
        deps.jobs.cancelJob(ws.name); // job tasks running for real stop with their workspace
        void deps.applications.stopWorkspace(ws.name); // and so do its applications' programs
        void deps.sandboxes.retireWorkspace(ws.name, sandboxes, (err) =>
          deps.logger.warn({ workspace: ws.name, err: err.message }, "workspace sandbox cleanup failed"),
        );
        deps.accounts.deleteWorkspace(ws.name);
        deps.meter.stopWorkspace(ws.name); // its resources are gone: their usage ends now
        return ws.doc;
      },
    },
    {
      id: "leaveWorkspace",
      method: "delete",
      path: "/workspaces/:workspaceName/leave",
      level: "account",
      scope: "workspaces:leave",
      handler: (ctx) => {
        const ws = visibleWorkspace(deps, ctx, ctx.params.workspaceName!);
        if (!deps.accounts.removeMembership(ctx.principal.sub, ws.name)) throw errors.notFound(`not a member of workspace "${ws.name}"`);
        return ws.doc;
      },
    },
    {
      id: "listAccounts",
      method: "get",
      path: "/accounts",
      scope: "workspaces:list",
      level: "account",
      handler: (ctx) => {
        const ids = new Set([ctx.principal.accountId, ...[...ctx.principal.workspaces.keys()].map((w) => deps.accounts.workspace(w)?.accountId)]);
        return [...ids]
          .filter((id): id is string => Boolean(id))
          .map((id) => {
            const account = deps.accounts.account(id);
            return {
              id,
              name: account?.name ?? id,
              createdAt: account?.created_at,
              role: id === ctx.principal.accountId && ctx.principal.accountAdmin ? "admin" : "member",
              workspaces: deps.accounts
                .workspacesOfAccount(id)
                .filter((w) => ctx.principal.workspaces.has(w.name))
                .map((w) => w.name),
            };
          });
      },
    },
    {
      id: "getWorkspaceFeatures",
      method: "get",
      path: "/features",
      scope: "workspaces:get",
      handler: () => ({ features: Object.fromEntries(Object.entries(FEATURE_FLAGS).filter(([, on]) => on)) }),
    },
    {
      id: "testFeatureFlag",
      method: "get",
      path: "/features/:featureKey",
      scope: "workspaces:get",
      handler: (ctx) => {
        const key = ctx.params.featureKey!;
        if (!(key in FEATURE_FLAGS)) throw errors.notFound(`feature "${key}" not found`);
        return { featureKey: key, enabled: FEATURE_FLAGS[key], variant: FEATURE_FLAGS[key] ? "on" : "off", payload: {}, evaluatedAt: iso(deps.clock.now()) };
      },
    },
    {
      id: "listWorkspaceUsers",
      method: "get",
      path: "/users",
      scope: "workspaces:get",
      handler: (ctx) =>
        deps.accounts.membersOf(ctx.workspace).map((u) => ({
          sub: u.sub,
          email: u.email,
          email_verified: true,
          given_name: "",
          family_name: "",
          role: u.ws_role,
          accepted: true,
          expired: false,
          source: "invitation",
        })),
    },
    {
      id: "inviteWorkspaceUser",
      method: "post",
      path: "/users",
      scope: "workspaces:invite",
      handler: (ctx) => {
        if (!ctx.isAdmin) throw errors.forbidden("only a workspace admin may invite users");
        const { email } = parse(z.strictObject({ email: z.email() }), ctx.body ?? {}, "body");
        const user = deps.accounts.userByEmail(email);
        if (!user) throw errors.notFound(`no user with email "${email}" (seed users through /_sim/seed)`);
        deps.accounts.setMembership(user.sub, ctx.workspace, "member");
        const now = iso(deps.clock.now());
        return {
          email: user.email,
          workspace: ctx.workspace,
          role: "member",
          invitedBy: ctx.actor,
          createdAt: now,
          updatedAt: now,
          createdBy: ctx.actor,
          updatedBy: ctx.actor,
        };
      },
    },
    {
      id: "updateWorkspaceUserRole",
      method: "put",
      path: "/users/:subOrEmail",
      scope: "workspaces:update",
      handler: (ctx) => {
        if (!ctx.isAdmin) throw errors.forbidden("only a workspace admin may change roles");
        const { role } = parse(z.strictObject({ role: z.enum(["admin", "member"]) }), ctx.body ?? {}, "body");
        const member = deps.accounts.membersOf(ctx.workspace).find((u) => u.sub === ctx.params.subOrEmail || u.email === ctx.params.subOrEmail?.toLowerCase());
        if (!member) throw errors.notFound(`user "${ctx.params.subOrEmail}" is not a member of this workspace`);
        deps.accounts.setMembership(member.sub, ctx.workspace, role);
        return { sub: member.sub, email: member.email, email_verified: true, role, accepted: true, expired: false, source: "invitation" };
      },
    },
    {
      id: "removeWorkspaceUser",
      method: "delete",
      path: "/users/:subOrEmail",
      scope: "workspaces:remove",
      handler: (ctx) => {
        if (!ctx.isAdmin) throw errors.forbidden("only a workspace admin may remove users");
        const member = deps.accounts.membersOf(ctx.workspace).find((u) => u.sub === ctx.params.subOrEmail || u.email === ctx.params.subOrEmail?.toLowerCase());
        if (!member) throw errors.notFound(`user "${ctx.params.subOrEmail}" is not a member of this workspace`);
        deps.accounts.removeMembership(member.sub, ctx.workspace);
        return { message: `${member.email} removed from ${ctx.workspace}` };
      },
    },
  ];
}
