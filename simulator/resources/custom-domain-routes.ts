import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { buildNew, insertChild, insertNew, loadItem, renderDoc, save } from "./crud.js";
import type { ResourceDeps } from "./kind.js";
import { customDomainKind } from "./kinds/config.js";
import { applicationKind } from "./kinds/workloads.js";

/** Custom domains beyond CRUD: an application's own domain, verification against the simulated DNS, shares across workspaces. */

/** Verify: the TXT records the domain was given must be published in the simulated DNS (set with PUT /_sim/dns/{domain}). */
function verifyDomain(deps: ResourceDeps, ctx: OpContext) {
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

function domainShares(deps: ResourceDeps, ctx: OpContext, domain: string) {
  return deps.resources
    .list<{ workspace: string; status: string; workspaceDisplayName?: string }>({
      workspace: ctx.workspace,
      kind: SHARE_KIND,
      parent: domain,
      sort: "createdAt:asc",
    })
    .map((s) => s.doc);
}

function shareDomain(deps: ResourceDeps, ctx: OpContext) {
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

export function customDomainOperations(deps: ResourceDeps): Operation[] {
  return [
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
  ];
}
