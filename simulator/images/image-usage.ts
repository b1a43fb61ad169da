import type { ResourceType as MetricsType } from "../metrics/dimensions.js";
import { refOf, resourceUid } from "../resources/resource-usage.js";
import type { StoredResource } from "../store/resources.js";
import type { ImageDoc, ResourceType } from "./image-doc.js";
import type { Clock } from "../../src/clock.js";
import type { UsageMeter } from "../metrics/meter.js";

/** Image storage by repository type: function images bill as MCP servers' (the metrics have no "function" type). */
const BILLED_AS: Record<ResourceType, MetricsType> = { agents: "agent", functions: "mcp_server", sandboxes: "sandbox", jobs: "job" };

const dimensionOf = (type: ResourceType) => `${BILLED_AS[type]}_image_storage_gbs`;

/**
 * An image is billed for the layers it stores (spec.size bytes, in GB) while
 * it exists; a copy shared from another workspace stores nothing of its own
 * (same layer digests), so only the source pays. Call after every change.
 */
export function meterImage(deps: { meter: UsageMeter; clock: Clock }, item: StoredResource<ImageDoc>): void {
  const type = item.doc.metadata.resourceType;
  const ref = refOf(item, BILLED_AS[type]);
  if (item.doc.metadata.sourceWorkspace || item.doc.spec.size <= 0) deps.meter.stop(ref.resourceUuid, dimensionOf(type));
  else deps.meter.run(ref, dimensionOf(type), item.doc.spec.size / 2 ** 30, deps.clock.now());
}

/** Closes the storage span of a deleted image. */
export function unmeterImage(deps: { meter: UsageMeter }, item: StoredResource<ImageDoc>): void {
  deps.meter.stop(resourceUid(item));
}
