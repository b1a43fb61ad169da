import { HOUR_MS } from "./buckets.js";
import { DIMENSION_BY_NAME, type ResourceType } from "./dimensions.js";
import type { UsageEvent, UsageStore } from "./usage-store.js";

/**
 * What the simulator calls as its resources live. Usage of a span (a sandbox
 * running from t0 to t1, an image stored for a day) is recorded as one event
 * per UTC hour it touches, stamped at the start of its slice, so hourly
 * buckets see usage where it happened.
 *
 * Call sites: resources/resource-usage.ts (deployments while DEPLOYED, volumes,
 * verified custom domains; after every create, update, settle and delete),
 * sandboxes/sandbox-usage.ts (a real sandbox agent's run time),
 * images/image-usage.ts, sandboxes/snapshots.ts (storage), jobs/job-usage.ts (job
 * compute per ended execution, straight to the store). UsageMeter (meter.ts)
 * keeps the open spans. `recordUsage` (counts, e.g. agent async requests)
 * has no caller in the simulator: it serves no agent invocations.
 */
export interface ResourceRef {
  workspace: string;
  resourceType: ResourceType;
  resourceName: string;
  resourceUuid: string;
}

/** Records discrete usage (e.g. agent async requests: `usage` = count) at `at` (ms). */
export function recordUsage(store: UsageStore, resource: ResourceRef, billingDimension: string, usage: number, at: number): void {
  store.record([{ ...resource, billingDimension, usage, ts: at }], "usage");
}

/**
 * Records the usage of [from, to): GB-seconds (`gb` × seconds) for `gbs`
 * dimensions, active hours for `hours` dimensions (`gb` ignored), split at
 * UTC hour boundaries. Nothing is recorded for an empty span.
 */
export function recordSpan(store: UsageStore, resource: ResourceRef, billingDimension: string, span: { from: number; to: number; gb?: number }): number {
  const dim = DIMENSION_BY_NAME.get(billingDimension);
  if (!dim || dim.unit === "count") throw new Error(`recordSpan: ${billingDimension} is not a gbs or hours dimension`);
  const events: UsageEvent[] = [];
  for (let t = span.from; t < span.to;) {
    const next = Math.min(span.to, (Math.floor(t / HOUR_MS) + 1) * HOUR_MS);
    const seconds = (next - t) / 1000;
    const usage = dim.unit === "hours" ? seconds / 3600 : seconds * (span.gb ?? 0);
    events.push({ ...resource, billingDimension, usage, ts: t });
    t = next;
  }
  return events.length ? store.record(events, "usage") : 0;
}
