import { treePssBytes } from "../launcher/proc.js";
import type { LauncherNode } from "../launcher/types.js";
import type { SandboxAgents } from "./registry.js";

/**
 * What /health says about sandbox starts: admission (how many start at once, are starting, wait their turn)
 * and the warm pool (kept, ready now, what its idle sandboxes cost the machine: PSS of their process trees).
 */
export function startsHealth(agents: SandboxAgents): {
  starts: { concurrency: number; starting: number; queued: number };
  warm?: { size: number; idle: number; memoryMiB: number };
  nodes?: LauncherNode[];
} {
  const queue = agents.startQueue;
  const warm = agents.warmPool();
  const nodes = agents.launcherNodes();
  return {
    starts: { concurrency: queue.concurrency, starting: queue.running, queued: queue.queued },
    ...(nodes ? { nodes } : {}),
    ...(warm ? { warm: { size: warm.size, idle: warm.idle, memoryMiB: Math.round((treePssBytes(warm.pids) / 1048576) * 10) / 10 } } : {}),
  };
}
