import { errors } from "../../src/errors.js";
import type { OpContext } from "../http/operation.js";
import type { ResourceDeps, ResourceDoc } from "./kind.js";

/** Names in `spec.policies` / `spec.integrationConnections` must exist in the workspace (400 naming the field). */
export function checkReferences(deps: Pick<ResourceDeps, "resources">, doc: ResourceDoc, ctx: OpContext): void {
  const refs: [string, string, string][] = [
    ["policies", "policy", "spec.policies"],
    ["integrationConnections", "integration-connection", "spec.integrationConnections"],
  ];
  for (const [field, kind, label] of refs) {
    const names = doc.spec[field];
    if (!Array.isArray(names)) continue;
    names.forEach((name, i) => {
      if (typeof name !== "string" || !deps.resources.get(ctx.workspace, kind, name))
        throw errors.badRequest(`${label}[${i}]: ${kind.replace("-", " ")} "${String(name)}" does not exist`);
    });
  }
}

/** Kinds that reference policies and integration connections by name. */
export const REFERRING_KINDS = ["agent", "function", "job", "model", "sandbox", "application"];

/** Names of resources whose spec[field] lists `name` (for 409 on delete and for policy usages). */
export function referrers(deps: Pick<ResourceDeps, "resources">, ctx: OpContext, field: string, name: string): { kind: string; name: string }[] {
  return deps.resources
    .allOfKind<ResourceDoc>(ctx.workspace, REFERRING_KINDS)
    .filter((r) => Array.isArray(r.doc.spec?.[field]) && (r.doc.spec[field] as unknown[]).includes(name))
    .map((r) => ({ kind: r.kind, name: r.name }));
}

export const runUrl = (deps: Pick<ResourceDeps, "urls">, ctx: OpContext, plural: string, name: string): string =>
  `${deps.urls.base}/${ctx.workspace}/${plural}/${name}`;
