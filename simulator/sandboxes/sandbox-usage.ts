import type { SupervisorEvent } from "../launcher/index.js";
import type { ResourceDoc } from "../resources/kind.js";
import { refOf } from "../resources/resource-usage.js";
import type { SandboxAgents } from "../agents/registry.js";
import type { Clock } from "../../src/clock.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { ResourceStore } from "../store/resources.js";

export const SANDBOX_COMPUTE = "sandbox_compute_runtime_gbs";

/**
 * A sandbox with a real agent is billed for the agent's run time:
 * its compute span opens when the agent is healthy (started, restarted) and
 * closes when it stops, crashes or cannot be restarted; memory × time as for
 * every compute dimension (spec.runtime.memory, 4096 MB by default).
 * Called with every supervisor event of a sandbox's agent.
 */
export function meterSandboxAgent(
  deps: { resources: ResourceStore; meter: UsageMeter; clock: Clock; agents: SandboxAgents },
  workspace: string,
  sandbox: string,
  event: SupervisorEvent,
): void {
  const item = deps.resources.get<ResourceDoc>(workspace, "sandbox", sandbox);
  if (!item) return; // deleted: the delete closed its spans
  const ref = refOf(item, "sandbox");
  const now = deps.clock.now();
  if (event.type === "started" || event.type === "restarted") {
    deps.meter.run(ref, SANDBOX_COMPUTE, computeGb(item), now);
    return;
  }
  // A stop from the previous agent of a sandbox deleted and re-created under the same name, arriving
  // once the new agent runs, is not this sandbox's.
  if (deps.agents.get(workspace, sandbox)?.state === "running") return;
  deps.meter.stop(ref.resourceUuid, SANDBOX_COMPUTE, now);
}

/**
 * Standby accrues no compute (the platform bills a sleeping sandbox for its storage only): the compute span
 * closes when the sandbox goes to standby and a new one opens when it resumes.
 */
export function meterSandboxStandby(
  deps: { resources: ResourceStore; meter: UsageMeter; clock: Clock },
  workspace: string,
  sandbox: string,
  state: "RUNNING" | "STANDBY",
): void {
  const item = deps.resources.get<ResourceDoc>(workspace, "sandbox", sandbox);
  if (!item) return;
  const ref = refOf(item, "sandbox");
  const now = deps.clock.now();
  if (state === "STANDBY") return void deps.meter.stop(ref.resourceUuid, SANDBOX_COMPUTE, now);
  deps.meter.run(ref, SANDBOX_COMPUTE, computeGb(item), now);
}

/** spec.runtime.memory in GB (4096 MB by default). */
function computeGb(item: { doc: ResourceDoc }): number {
  const memory = (item.doc.spec?.runtime as { memory?: number } | undefined)?.memory;
  return (typeof memory === "number" && memory > 0 ? memory : 4096) / 1024;
}
