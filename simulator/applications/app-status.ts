import { toIso as iso, type Clock } from "../../src/clock.js";
import type { ResourceDoc } from "../resources/kind.js";
import type { ResourceStore } from "../store/resources.js";
import type { AppRevision } from "./revisions.js";

/** ApplicationSpec.port: "Port the application listens on (default 8080)". */
export const DEFAULT_APPLICATION_PORT = 8080;

/** What the active revision runs. */
export interface ActiveCompute {
  revision: string;
  image: string;
  memory?: number;
  port: number;
  env: Record<string, string>;
}

type AppDoc = ResourceDoc & { __pending?: unknown; __revision?: number };

/** The port a revision listens on: its own, else the spec's, else 8080 (AppRevision.port's rule). */
export function applicationPort(doc: ResourceDoc, revision?: Partial<AppRevision>): number {
  return revision?.port ?? (doc.spec.port as number | undefined) ?? DEFAULT_APPLICATION_PORT;
}

/** The record's active revision as something to run; undefined when the application is gone or has none. */
export function activeCompute(resources: ResourceStore, workspace: string, name: string): ActiveCompute | undefined {
  const doc = resources.get<AppDoc>(workspace, "application", name)?.doc;
  if (!doc) return undefined;
  const revisions = (doc.spec.revisions ?? []) as AppRevision[];
  const active = (doc.spec.revision as { active?: string } | undefined)?.active;
  const revision = revisions.find((r) => r.id === active) ?? revisions[0];
  if (!revision?.image) return undefined;
  const env: Record<string, string> = {};
  for (const e of (revision.envs ?? []) as { name?: string; value?: string }[]) if (e.name) env[e.name] = e.value ?? "";
  return { revision: revision.id, image: revision.image, memory: revision.memory, port: applicationPort(doc, revision), env };
}

/** Sets an application's status with an event saying why (the workload's word, not the clock's: no planned moves left). */
export function recordApplicationStatus(
  deps: { resources: ResourceStore; clock: Clock },
  workspace: string,
  name: string,
  status: string,
  message: string,
  revision?: string,
): void {
  const item = deps.resources.get<AppDoc>(workspace, "application", name);
  if (!item || item.status === "DELETING") return;
  const doc = item.doc;
  delete doc.__pending;
  doc.status = status;
  doc.events = [
    ...(doc.events ?? []),
    { type: "deployment", status, message, revision: revision ?? `rev-${doc.__revision ?? 1}`, time: iso(deps.clock.now()) },
  ];
  item.status = status;
  deps.resources.update(item);
}

/** Adds an event to an application's record, its status kept (an image build on first use says what it does). */
export function recordApplicationEvent(deps: { resources: ResourceStore; clock: Clock }, workspace: string, name: string, message: string, type: string): void {
  const item = deps.resources.get<AppDoc>(workspace, "application", name);
  if (!item) return;
  const doc = item.doc;
  doc.events = [...(doc.events ?? []), { type, status: item.status, message, revision: `rev-${doc.__revision ?? 1}`, time: iso(deps.clock.now()) }];
  deps.resources.update(item);
}
