import { scopeFor } from "../auth/scopes.js";
import type { Operation, OpContext } from "../http/operation.js";
import { applicationRevisions } from "../applications/revisions.js";
import { loadItem } from "./crud.js";
import type { AnyResourceKind } from "./kind.js";
import type { CoreEvent } from "./lifecycle.js";
import { agentKind, applicationKind, functionKind, jobKind, modelKind, type JobKindDeps } from "./kinds/workloads.js";

/** The workloads' revisions (GET .../revisions): one per deployment event's revision, the newest first. */

function revisions(deps: JobKindDeps, kind: AnyResourceKind, ctx: OpContext) {
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

export function revisionOperations(deps: JobKindDeps): Operation[] {
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
  ];
}
