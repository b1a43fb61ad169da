/**
 * The fixed vocabulary of the account metrics API (control-plane reference
 * §3.15, billing.mdx): raw resource types, billing dimensions with their unit
 * and owning resource type, and the groupBy dimensions. Ids are stable: they
 * are stored in the usage tables.
 */

export const RESOURCE_TYPES = ["sandbox", "agent", "job", "mcp_server", "volume", "custom_domain"] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

export type BillingUnit = "gbs" | "count" | "hours";

export interface BillingDimension {
  id: number;
  name: string;
  unit: BillingUnit;
  resourceType: ResourceType;
  /** Simulator default price, USD per unit (not the real service's tariff). */
  defaultUsdPerUnit: number;
}

// ≈ $0.03 per GB-hour of running memory; ≈ $0.10 per GB-month stored (30 d);
// volumes ≈ $0.15 per GB-month; $1 per million async requests; $0.01 per domain-hour.
const COMPUTE = 0.03 / 3600;
const IMAGE = 0.1 / (30 * 86_400);
const VOLUME = 0.15 / (30 * 86_400);

const dims: Array<Omit<BillingDimension, "id">> = [
  { name: "sandbox_compute_runtime_gbs", unit: "gbs", resourceType: "sandbox", defaultUsdPerUnit: COMPUTE },
  { name: "sandbox_image_storage_gbs", unit: "gbs", resourceType: "sandbox", defaultUsdPerUnit: IMAGE },
  { name: "sandbox_snapshot_storage_gbs", unit: "gbs", resourceType: "sandbox", defaultUsdPerUnit: IMAGE },
  { name: "agent_compute_runtime_gbs", unit: "gbs", resourceType: "agent", defaultUsdPerUnit: COMPUTE },
  { name: "agent_image_storage_gbs", unit: "gbs", resourceType: "agent", defaultUsdPerUnit: IMAGE },
  { name: "agent_async_requests_count", unit: "count", resourceType: "agent", defaultUsdPerUnit: 1e-6 },
  { name: "job_compute_runtime_gbs", unit: "gbs", resourceType: "job", defaultUsdPerUnit: COMPUTE },
  { name: "job_image_storage_gbs", unit: "gbs", resourceType: "job", defaultUsdPerUnit: IMAGE },
  { name: "mcp_server_compute_runtime_gbs", unit: "gbs", resourceType: "mcp_server", defaultUsdPerUnit: COMPUTE },
  { name: "mcp_server_image_storage_gbs", unit: "gbs", resourceType: "mcp_server", defaultUsdPerUnit: IMAGE },
  { name: "volume_storage_gbs", unit: "gbs", resourceType: "volume", defaultUsdPerUnit: VOLUME },
  { name: "custom_domain_active_time_hours", unit: "hours", resourceType: "custom_domain", defaultUsdPerUnit: 0.01 },
];

export const BILLING_DIMENSIONS: readonly BillingDimension[] = Object.freeze(dims.map((d, i) => Object.freeze({ ...d, id: i + 1 })));
export const BILLING_DIMENSION_NAMES = BILLING_DIMENSIONS.map((d) => d.name);
export const DIMENSION_BY_NAME = new Map(BILLING_DIMENSIONS.map((d) => [d.name, d]));
export const DIMENSION_BY_ID = new Map(BILLING_DIMENSIONS.map((d) => [d.id, d]));

/** Resource-type ids are 1-based positions in RESOURCE_TYPES. */
export const resourceTypeId = (type: ResourceType): number => RESOURCE_TYPES.indexOf(type) + 1;
export const isResourceType = (value: string): value is ResourceType => (RESOURCE_TYPES as readonly string[]).includes(value);

/** The static group-by enum; order is the canonical order of entry fields and of the sort key. */
export const GROUP_BY_VALUES = ["workspace", "resource_type", "resource_name", "resource_uuid", "billing_dimension"] as const;
export type GroupByDimension = (typeof GROUP_BY_VALUES)[number];
export const isGroupBy = (value: string): value is GroupByDimension => (GROUP_BY_VALUES as readonly string[]).includes(value);
