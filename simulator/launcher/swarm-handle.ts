import { AGENT_PORT } from "./docker-args.js";
import type { SandboxEgressSpec } from "./gateway.js";
import { keepEgressTunnels, setTaskOutbound, type SwarmEgressFiles } from "./swarm-egress.js";
import type { NodeEngines } from "./swarm-nodes.js";
import type { TaskStatus } from "./swarm-tasks.js";
import type { AgentExit, AgentHandle } from "./types.js";

/**
 * A running swarm task as the simulator's AgentHandle: the agent at its node's published port; standby by
 * `docker pause` through the task's own node's engine where the simulator reaches it (swarm-nodes.ts), none
 * elsewhere; and, with the simulator's egress, the tunnels that carry the sandbox's connections to it and the
 * task's direct outbound path cut or restored live (swarm-egress.ts).
 */
export interface SwarmTaskInputs {
  task: TaskStatus & { nodeId: string };
  url: string;
  exited: Promise<AgentExit>;
  placement: string;
  engines: NodeEngines;
  /** Removes the service (its files kept) and settles `exited`. */
  stop(graceMs?: number): Promise<AgentExit>;
  egress?: { spec: SandboxEgressSpec; token: string; files: SwarmEgressFiles; outbound: boolean };
}

/** The handle; rejects (the caller removes the service) where a policy's cut of the direct path cannot be applied. */
export async function swarmTaskHandle(inputs: SwarmTaskInputs): Promise<AgentHandle> {
  const { task, url, exited, engines, egress } = inputs;
  const handle: AgentHandle = { url, exited, placement: inputs.placement, stop: inputs.stop };
  if (egress) {
    const tunnels = keepEgressTunnels(url, egress.token, egress.spec.accept);
    void exited.then(() => {
      tunnels.close();
      egress.files.stopHosts();
    });
    const container = task.containerId ?? "";
    const setOutbound = (on: boolean) => setTaskOutbound(engines, task.nodeId, container, AGENT_PORT, on && egress.outbound);
    if (egress.spec.direct === false || !egress.outbound) await setOutbound(false);
    handle.setDirectOutbound = setOutbound;
  }
  const engine = await engines.of(task.nodeId);
  if (!engine.env || !task.containerId) return handle;
  const pausing = engines.pausing(task.nodeId, task.containerId);
  // A paused container's processes cannot take SIGTERM: it goes on first, then drains.
  return { ...handle, freeze: pausing.freeze, thaw: pausing.thaw, stop: (graceMs) => pausing.resumed().then(() => inputs.stop(graceMs)) };
}
