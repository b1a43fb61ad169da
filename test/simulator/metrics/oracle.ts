import { bucketStart, bucketStarts, type Resolution } from "../../../simulator/metrics/buckets.js";
import { DIMENSION_BY_NAME, GROUP_BY_VALUES, type GroupByDimension } from "../../../simulator/metrics/dimensions.js";
import type { WireEvent } from "./harness.js";

/**
 * The expected answer computed the slow, obvious way — a loop over the
 * events — to check the SQL against. Each event's cost is its usage times
 * the default price, rounded to the nano-dollar, as the store documents.
 */
export interface Expected {
  groups: Map<string, { fields: Record<string, string>; costNanos: number; usage: number; buckets: Map<number, number> }>;
  totalNanos: number;
  buckets: number[];
}

const FIELD: Record<GroupByDimension, Array<[string, (e: WireEvent) => string]>> = {
  workspace: [["workspace", (e) => e.workspace]],
  resource_type: [["resourceType", (e) => e.resourceType]],
  resource_name: [
    ["resourceName", (e) => e.resourceName],
    ["workspace", (e) => e.workspace],
    ["resourceType", (e) => e.resourceType],
  ],
  resource_uuid: [
    ["resourceUuid", (e) => e.resourceUuid],
    ["resourceName", (e) => e.resourceName],
    ["workspace", (e) => e.workspace],
    ["resourceType", (e) => e.resourceType],
  ],
  billing_dimension: [
    ["billingDimension", (e) => e.billingDimension],
    ["resourceType", (e) => e.resourceType],
  ],
};

export const costNanos = (e: WireEvent) => Math.round(e.usage * DIMENSION_BY_NAME.get(e.billingDimension)!.defaultUsdPerUnit * 1e9);

export function expected(
  events: WireEvent[],
  q: { startTime: string; endTime: string; resolution: Resolution; groupBy: GroupByDimension[]; workspaces: string[]; resourceType?: string },
): Expected {
  const start = Date.parse(q.startTime);
  const end = Date.parse(q.endTime);
  const groups: Expected["groups"] = new Map();
  let totalNanos = 0;
  for (const e of events) {
    const ts = Date.parse(e.timestamp);
    if (ts < start || ts >= end || !q.workspaces.includes(e.workspace)) continue;
    if (q.resourceType && e.resourceType !== q.resourceType) continue;
    const fields: Record<string, string> = {};
    for (const g of GROUP_BY_VALUES) if (q.groupBy.includes(g)) for (const [f, get] of FIELD[g]) fields[f] = get(e);
    const key = groupKey(fields);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { fields, costNanos: 0, usage: 0, buckets: new Map() }));
    const c = costNanos(e);
    g.costNanos += c;
    g.usage += e.usage;
    const b = bucketStart(ts, q.resolution);
    g.buckets.set(b, (g.buckets.get(b) ?? 0) + c);
    totalNanos += c;
  }
  return { groups, totalNanos, buckets: bucketStarts(start, end, q.resolution) };
}

export function groupKey(fields: object): string {
  return ["workspace", "resourceType", "resourceName", "resourceUuid", "billingDimension"]
    .map((f) => String((fields as Record<string, unknown>)[f] ?? "-"))
    .join("|");
}

export const nanos = (usd: number) => Math.round(usd * 1e9);
