import { createHash } from "node:crypto";
import type { ResourceType } from "../metrics/dimensions.js";
import type { ResourceRef } from "../metrics/record.js";
import type { StoredResource } from "../store/resources.js";
import type { PendingMove } from "./lifecycle.js";
import type { Clock } from "../../src/clock.js";
import type { UsageMeter } from "../metrics/meter.js";

/**
 * Usage metering of workspace resources (account metrics): after
 * every change of a resource, `meterResource` tells the meter whether it is
 * live and how big it is; a delete closes its spans. Deployments are
 * metered while DEPLOYED, from the due time of the move (moves are settled
 * lazily on read: the span is opened at the planned time, not at the read).
 */

/** Memory (MB) when a runtime names none: sandboxes get 4096 from their kind; the simulator's default for the others. */
export const DEFAULT_MEMORY_MB = 2048;

/**
 * The fields of a stored document that metering reads. Any document may come (a schedule, a share, an image):
 * those without them are simply not billed, or billed by their identity alone.
 */
interface MeterableDoc {
  __uid?: unknown;
  metadata?: { createdAt?: string };
  spec?: Record<string, unknown>;
  status?: string;
  __pending?: PendingMove[];
}

type Meterable = Pick<StoredResource<MeterableDoc>, "workspace" | "kind" | "parent" | "name" | "doc">;

/**
 * The resource's stable usage id: `__uid` (given at create), or for a
 * document stored before there was one, a digest of its identity and
 * creation time (unique: a name reused after a delete has another createdAt).
 */
export function resourceUid(item: Meterable): string {
  const uid = item.doc.__uid;
  if (typeof uid === "string") return uid;
  const hex = createHash("sha256")
    .update(`${item.workspace}/${item.kind}/${item.parent}/${item.name}/${item.doc.metadata?.createdAt ?? ""}`)
    .digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

export function refOf(item: Meterable, resourceType: ResourceType): ResourceRef {
  return { workspace: item.workspace, resourceType, resourceName: item.name, resourceUuid: resourceUid(item) };
}

const memoryGb = (doc: MeterableDoc, fallback = DEFAULT_MEMORY_MB) => {
  const memory = (doc.spec?.runtime as { memory?: number } | undefined)?.memory;
  return (typeof memory === "number" && memory > 0 ? memory : fallback) / 1024;
};

interface Metering {
  type: ResourceType;
  dimension: string;
  gb?: number;
  /** "deployment": live while DEPLOYED; "stored": live while it exists; "verified": a custom domain once verified. */
  live: "deployment" | "stored" | "verified";
}

/**
 * What a sandbox's compute is billed by: its record's DEPLOYED time (records only), or its agent's run time
 * ("agent": sandboxes/sandbox-usage.ts meters it from the agent's events). The composition root picks it once.
 */
export type SandboxCompute = "record" | "agent";

/** What a resource of this kind is billed for; undefined: nothing. */
export function meteringOf(deps: { sandboxCompute: SandboxCompute }, item: Meterable): Metering | undefined {
  const doc = item.doc;
  switch (item.kind) {
    case "sandbox":
      // With real agents, a sandbox is billed for its agent's run time (sandboxes/sandbox-usage.ts).
      return deps.sandboxCompute === "agent"
        ? undefined
        : { type: "sandbox", dimension: "sandbox_compute_runtime_gbs", gb: memoryGb(doc, 4096), live: "deployment" };
    case "agent":
      return { type: "agent", dimension: "agent_compute_runtime_gbs", gb: memoryGb(doc), live: "deployment" };
    case "function":
      return doc.spec?.type === "mcp" ? { type: "mcp_server", dimension: "mcp_server_compute_runtime_gbs", gb: memoryGb(doc), live: "deployment" } : undefined;
    case "volume":
      return { type: "volume", dimension: "volume_storage_gbs", gb: ((doc.spec?.size as number | undefined) ?? 1024) / 1024, live: "stored" };
    case "custom-domain":
      return { type: "custom_domain", dimension: "custom_domain_active_time_hours", live: "verified" };
    default:
      return undefined;
  }
}

/** Brings the meter in line with the resource as it is now (after create, update, settle, verify, status hook). */
export function meterResource(deps: { sandboxCompute: SandboxCompute; meter: UsageMeter; clock: Clock }, item: Meterable): void {
  const m = meteringOf(deps, item);
  if (!m) return;
  const ref = refOf(item, m.type);
  const now = deps.clock.now();
  if (m.live === "stored") return deps.meter.run(ref, m.dimension, m.gb, now);
  if (m.live === "verified") {
    if (item.doc.spec?.status === "verified") deps.meter.run(ref, m.dimension, undefined, now);
    else deps.meter.stop(ref.resourceUuid, m.dimension, now);
    return;
  }
  const doc = item.doc;
  if (doc.status === "DEPLOYED") return deps.meter.run(ref, m.dimension, m.gb, now);
  // Due to reach DEPLOYED: a running span carries on (redeploy), else one opens at the due time.
  const due = doc.__pending?.find((p) => p.status === "DEPLOYED");
  if (due && due.atMs !== null) return deps.meter.run(ref, m.dimension, m.gb, Math.max(now, due.atMs));
  if (due && deps.meter.isOpen(ref.resourceUuid, m.dimension)) return; // manual mode: runs on until stepped
  deps.meter.stop(ref.resourceUuid, m.dimension, now);
}

/** Closes every span of a deleted resource. */
export function unmeterResource(deps: { meter: UsageMeter; clock: Clock }, item: Meterable): void {
  deps.meter.stop(resourceUid(item), undefined, deps.clock.now());
}
