import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import { signJwt } from "../auth/jwt.js";
import { scopeFor } from "../auth/scopes.js";
import type { Operation, OpContext } from "../http/operation.js";
import { buildNew, insertChild, insertNew, loadItem, renderDoc, save, showSecrets } from "./crud.js";
import type { AnyResourceKind, ResourceDeps, ResourceDoc, ResourceKind } from "./kind.js";
import { customDomainKind, integrationConnectionKind, policyKind } from "./kinds/config.js";
import { egressGatewayKind, egressIpKind } from "./kinds/network.js";
import { driveKind, volumeKind, volumeTemplateKind, type StorageKindDeps } from "./kinds/storage.js";
import { agentKind, applicationKind, functionKind, jobKind, modelKind, type JobKindDeps } from "./kinds/workloads.js";
import type { CoreEvent } from "./lifecycle.js";
import { applicationRevisions } from "../applications/revisions.js";

/** Operations attached to a kind that are not plain CRUD: revisions, lookups, verify, shares, tokens. */

/** The generic layer's dependencies with those of the kinds served here, and the key drive tokens are signed with. */
export interface ExtraDeps extends StorageKindDeps, JobKindDeps {
  jwtSecret: Buffer;
}

function revisions(deps: ExtraDeps, kind: AnyResourceKind, ctx: OpContext) {
  const item = loadItem(deps, kind, ctx, ctx.params[kind.param]!, "");
  const events = (item.doc.events ?? []) as CoreEvent[];
  const byRevision = new Map<string, CoreEvent>();
  for (const e of events) if (!byRevision.has(e.revision)) byRevision.set(e.revision, e);
  const current = `rev-${(item.doc as { __revision?: number }).__revision ?? 1}`;
  return [...byRevision.values()].reverse().map((e) => ({
    id: e.revision,
    active: e.revision === current,
    canary: false,
    status: e.revision === current ? item.doc.status : "ARCHIVED",
    trafficPercent: e.revision === current ? 100 : 0,
    createdAt: e.time,
    createdBy: item.doc.metadata.createdBy,
  }));
}

function byExternalId<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>, ctx: OpContext) {
  const found = deps.resources
    .list<ResourceDoc>({ workspace: ctx.workspace, kind: kind.kind, sort: "createdAt:desc" })
    .find((i) => i.doc.metadata.externalId === ctx.params.externalId);
  if (!found) throw errors.notFound(`no ${kind.kind} with externalId "${ctx.params.externalId}"`);
  return renderDoc(deps, kind, loadItem(deps, kind, ctx, found.name, "").doc, showSecrets(ctx));
}

function allUnderParents<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>, ctx: OpContext) {
  return deps.resources
    .list<ResourceDoc>({ workspace: ctx.workspace, kind: kind.kind, parent: null, sort: "createdAt:desc" })
    .map((i) => renderDoc(deps, kind, i.doc, false));
}

/** Verify: the TXT records the domain was given must be published in the simulated DNS (set with PUT /_sim/dns/{domain}). */
function verifyDomain(deps: ExtraDeps, ctx: OpContext) {
  const item = loadItem(deps, customDomainKind, ctx, ctx.params.domainName!, "");
  const spec = item.doc.spec as { txtRecords?: Record<string, string>; status?: string; lastVerifiedAt?: string; verificationError?: string };
  const published = deps.testHooks.dns.get(item.name)?.txt ?? {};
  const missing = Object.entries(spec.txtRecords ?? {})
    .filter(([name, value]) => published[name] !== value)
    .map(([name]) => name);
  spec.lastVerifiedAt = iso(deps.clock.now());
  if (missing.length) {
    spec.status = "failed";
    spec.verificationError = `TXT record${missing.length > 1 ? "s" : ""} not found: ${missing.join(", ")}`;
  } else {
    spec.status = "verified";
    delete spec.verificationError;
  }
  item.doc.metadata.updatedAt = spec.lastVerifiedAt;
  save(deps, item);
  return renderDoc(deps, customDomainKind, item.doc, false);
}

const SHARE_KIND = "custom-domain-share";

function domainShares(deps: ExtraDeps, ctx: OpContext, domain: string) {
  return deps.resources
    .list<{ workspace: string; status: string; workspaceDisplayName?: string }>({
      workspace: ctx.workspace,
      kind: SHARE_KIND,
      parent: domain,
      sort: "createdAt:asc",
    })
    .map((s) => s.doc);
}

function shareDomain(deps: ExtraDeps, ctx: OpContext) {
  const item = loadItem(deps, customDomainKind, ctx, ctx.params.domainName!, "");
  const { targetWorkspace } = parse(z.strictObject({ targetWorkspace: z.string().min(1, "required") }), ctx.body ?? {}, "body");
  const target = targetWorkspace === "account" ? undefined : deps.accounts.workspace(targetWorkspace);
  if (targetWorkspace !== "account" && (!target || target.accountId !== ctx.principal.accountId))
    throw errors.badRequest(`targetWorkspace: "${targetWorkspace}" is not a workspace of this account`);
  if (targetWorkspace === ctx.workspace) throw errors.badRequest("targetWorkspace: cannot share a domain with its own workspace");
  const share = { workspace: targetWorkspace, status: "active", workspaceDisplayName: String(target?.doc.displayName ?? "account") };
  insertChild(deps, ctx, { kind: SHARE_KIND, parent: item.name, name: targetWorkspace, status: "active", doc: share }, () =>
    errors.conflict(`domain already shared with "${targetWorkspace}"`),
  );
  return renderDoc(deps, customDomainKind, item.doc, false);
}

const AccessTokenTtlS = 3600;

export function extraOperations(deps: ExtraDeps): Operation[] {
  return [
    ...([agentKind, functionKind, jobKind, modelKind] as const).map((kind): Operation => ({
      id: `list${kind.kind[0]!.toUpperCase()}${kind.kind.slice(1)}Revisions`,
      method: "get",
      path: `${kind.collection}/:${kind.param}/revisions`,
      scope: scopeFor(kind.scope, "get"),
      handler: (ctx) => revisions(deps, kind, ctx),
    })),
    {
      id: "listApplicationRevisions",
      method: "get",
      path: "/applications/:applicationName/revisions",
      scope: "applications:get",
      handler: (ctx) => applicationRevisions(loadItem(deps, applicationKind, ctx, ctx.params.applicationName!, "").doc),
    },
    {
      id: "createApplicationCustomDomain",
      method: "post",
      path: "/applications/:applicationName/customdomains",
      scope: "customdomains:create",
      handler: (ctx) => {
        loadItem(deps, applicationKind, ctx, ctx.params.applicationName!, "");
        const doc = buildNew(deps, customDomainKind, ctx, "");
        doc.spec.domainType = "applications";
        doc.metadata.labels = { ...doc.metadata.labels, application: ctx.params.applicationName! };
        insertNew(deps, customDomainKind, ctx, "", doc);
        return renderDoc(deps, customDomainKind, doc, false);
      },
    },
    {
      id: "getVolumeByExternalId",
      method: "get",
      path: "/volumes/by-external-id/:externalId",
      scope: "volumes:get",
      handler: (ctx) => byExternalId(deps, volumeKind, ctx),
    },
    {
      id: "getDriveByExternalId",
      method: "get",
      path: "/drives/by-external-id/:externalId",
      scope: "admin",
      handler: (ctx) => byExternalId(deps, driveKind, ctx),
    },
    // HS256 tokens have no public key to publish; the set names the key id and algorithm.
    {
      id: "getDriveJwks",
      method: "get",
      path: "/drives/jwks.json",
      scope: "admin",
      level: "account",
      handler: () => ({ keys: [{ kty: "oct", kid: "sandbox-sim", alg: "HS256", use: "sig" }] }),
    },
    {
      id: "createDriveAccessToken",
      method: "post",
      path: "/drives/:driveName/access-token",
      scope: "admin",
      handler: (ctx) => {
        const drive = loadItem(deps, driveKind, ctx, ctx.params.driveName!, "");
        const iat = Math.floor(deps.clock.now() / 1000);
        const token = signJwt(
          {
            iss: "sandbox-sim",
            sub: ctx.principal.sub,
            sub_type: ctx.principal.type,
            scope: `drive:${drive.name}`,
            iat,
            exp: iat + AccessTokenTtlS,
            jti: deps.ids(),
            workspace: ctx.workspace,
          },
          deps.jwtSecret,
        );
        return { access_token: token, expires_in: AccessTokenTtlS, token_type: "Bearer" };
      },
    },
    {
      id: "deleteVolumeTemplateVersion",
      method: "delete",
      path: "/volume_templates/:volumeTemplateName/versions/:versionName",
      scope: "volumeTemplates:delete",
      handler: (ctx) => {
        const item = loadItem(deps, volumeTemplateKind, ctx, ctx.params.volumeTemplateName!, "");
        const versions = (item.doc.versions ?? []) as { name?: string }[];
        if (!versions.some((v) => v.name === ctx.params.versionName)) throw errors.notFound(`version "${ctx.params.versionName}" not found`);
        item.doc.versions = versions.filter((v) => v.name !== ctx.params.versionName);
        item.doc.state = {
          ...(item.doc.state as object),
          versionCount: (item.doc.versions as unknown[]).length,
          latestVersion: (item.doc.versions as { name?: string }[]).at(-1)?.name,
        };
        save(deps, item);
        return { message: `version ${ctx.params.versionName} deleted`, template: renderDoc(deps, volumeTemplateKind, item.doc, false) };
      },
    },
    {
      id: "verifyCustomDomain",
      method: "post",
      path: "/customdomains/:domainName/verify",
      scope: "customdomains:update",
      handler: (ctx) => verifyDomain(deps, ctx),
    },
    {
      id: "listCustomDomainShares",
      method: "get",
      path: "/customdomains/:domainName/share",
      scope: "customdomains:get",
      handler: (ctx) => domainShares(deps, ctx, loadItem(deps, customDomainKind, ctx, ctx.params.domainName!, "").name),
    },
    {
      id: "shareCustomDomain",
      method: "post",
      path: "/customdomains/:domainName/share",
      scope: "customdomains:update",
      handler: (ctx) => shareDomain(deps, ctx),
    },
    {
      id: "unshareCustomDomain",
      method: "delete",
      path: "/customdomains/:domainName/share/:targetWorkspace",
      scope: "customdomains:update",
      handler: (ctx) => {
        const item = loadItem(deps, customDomainKind, ctx, ctx.params.domainName!, "");
        if (!deps.resources.delete(ctx.workspace, SHARE_KIND, ctx.params.targetWorkspace!, item.name))
          throw errors.notFound(`domain not shared with "${ctx.params.targetWorkspace}"`);
        return renderDoc(deps, customDomainKind, item.doc, false);
      },
    },
    {
      id: "getPolicyUsages",
      method: "get",
      path: "/policies/:policyName/usages",
      scope: "policies:get",
      handler: (ctx) => {
        const policy = loadItem(deps, policyKind, ctx, ctx.params.policyName!, "");
        const users = deps.resources
          .allOfKind<ResourceDoc>(ctx.workspace, ["agent", "function", "job", "model", "sandbox"])
          .filter((r) => Array.isArray(r.doc.spec?.policies) && (r.doc.spec.policies as string[]).includes(policy.name));
        const of = (kind: string) => users.filter((u) => u.kind === kind).map((u) => ({ name: u.name, type: kind }));
        return { agents: of("agent"), functions: of("function"), jobs: of("job"), models: of("model"), sandboxes: of("sandbox") };
      },
    },
    { id: "listAllEgressGateways", method: "get", path: "/egressgateways", scope: "admin", handler: (ctx) => allUnderParents(deps, egressGatewayKind, ctx) },
    {
      id: "getEgressGatewayUsage",
      method: "get",
      path: "/egressgateways/usage",
      scope: "admin",
      handler: (ctx) => {
        const usage: Record<string, string[]> = {};
        for (const g of deps.resources.list<ResourceDoc>({ workspace: ctx.workspace, kind: egressGatewayKind.kind, parent: null, sort: "name:asc" }))
          usage[g.name] = [];
        for (const s of deps.resources.allOfKind<ResourceDoc>(ctx.workspace, ["sandbox"])) {
          const gateway = (s.doc.spec?.network as { egress?: { gateway?: string } } | undefined)?.egress?.gateway;
          if (gateway) (usage[gateway] ??= []).push(s.name);
        }
        return usage;
      },
    },
    { id: "listAllEgressIps", method: "get", path: "/egressips", scope: "admin", handler: (ctx) => allUnderParents(deps, egressIpKind, ctx) },
    ...["getIntegrationConnectionModelEndpointConfigurations:/endpointConfigurations", "listIntegrationConnectionModels:/models"].map((entry): Operation => {
      const [id, suffix] = entry.split(":") as [string, string];
      return {
        id,
        method: "get",
        path: `/integrations/connections/:connectionName${suffix}`,
        scope: "admin",
        handler: (ctx) => {
          const c = loadItem(deps, integrationConnectionKind, ctx, ctx.params.connectionName!, "");
          return suffix === "/models" ? [] : { integration: (c.doc.spec as { integration?: string }).integration ?? "", endpoints: {} };
        },
      };
    }),
    {
      id: "getIntegrationConnectionModel",
      method: "get",
      path: "/integrations/connections/:connectionName/models/:modelId",
      scope: "admin",
      handler: (ctx) => {
        loadItem(deps, integrationConnectionKind, ctx, ctx.params.connectionName!, "");
        throw errors.notFound(`model "${ctx.params.modelId}" not found on this connection`);
      },
    },
  ];
}
