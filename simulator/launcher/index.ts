import { BwrapLauncher } from "./bwrap.js";
import { DockerLauncher } from "./docker.js";
import { ProcessLauncher } from "./process.js";
import { LaunchError, type Launcher, type LauncherDescription } from "./types.js";

export type { AgentExit, AgentHandle, LaunchSpec, Launcher, LauncherDescription, LauncherNode, WarmPoolState } from "./types.js";

/** What /health and the start-up log say about a launcher (Launcher.describe). */
export function describeLauncher(launcher: Launcher): LauncherDescription {
  return launcher.describe?.() ?? { launcher: launcher.name, isolated: false, detail: "a custom launcher" };
}
export { LaunchError } from "./types.js";
export { AgentSupervisor, type AgentState, type SupervisorEvent, type SupervisorOptions } from "./supervisor.js";
export { ProcessLauncher } from "./process.js";
export { StartQueue, defaultStartConcurrency } from "./start-queue.js";
export { BwrapLauncher, bwrapPath, AGENT_DATA, AGENT_SOCKET, DRIVES, MEMORY_EVENTS } from "./bwrap.js";
export { probeIsolation } from "./isolation.js";
export { agentFetch, agentRequest, type AgentEndpoint } from "./endpoint.js";
export { DockerLauncher, dockerPath, dockerUnavailable } from "./docker.js";
import { SwarmLauncher } from "./swarm.js";
export { SwarmLauncher };

export const LAUNCHER_NAMES = ["process", "bwrap", "docker", "swarm"] as const;
export type LauncherName = (typeof LAUNCHER_NAMES)[number];

/** The launcher `--launcher <name>` selects. */
export function createLauncher(
  name: string,
  options: { agentMain?: string; network?: "outbound" | "none"; warm?: number; swarm?: { constraints?: string[]; registry?: string } } = {},
): Launcher {
  switch (name) {
    case "process":
      return new ProcessLauncher({ agentMain: options.agentMain });
    case "bwrap":
      return new BwrapLauncher({ agentMain: options.agentMain, network: options.network, warm: options.warm });
    case "docker":
      return new DockerLauncher({ agentMain: options.agentMain });
    case "swarm":
      return new SwarmLauncher({ agentMain: options.agentMain, constraints: options.swarm?.constraints, registry: options.swarm?.registry });
    default:
      throw new LaunchError(`unknown launcher "${name}": expected one of ${LAUNCHER_NAMES.join(", ")}`);
  }
}
