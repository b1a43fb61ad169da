import { errors } from "../../src/errors.js";
import type { Operation, OpContext } from "../http/operation.js";
import { loadItem, renderDoc } from "./crud.js";
import type { ResourceDeps, ResourceDoc, ResourceKind } from "./kind.js";
import { integrationConnectionKind, policyKind } from "./kinds/config.js";
import { egressGatewayKind, egressIpKind } from "./kinds/network.js";

/** Policies, egress gateways and IPs, integration connections beyond CRUD: usages, account-wide lists, model endpoints. */

function allUnderParents<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>, ctx: OpContext) {
  return deps.resources
    .list<ResourceDoc>({ workspace: ctx.workspace, kind: kind.kind, parent: null, sort: "createdAt:desc" })
    .map((i) => renderDoc(deps, kind, i.doc, false));
}

export function networkConfigOperations(deps: ResourceDeps): Operation[] {
  return [
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
