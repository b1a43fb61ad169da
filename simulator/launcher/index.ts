import { BwrapLauncher } from "./bwrap.js";
import { DockerLauncher } from "./docker.js";
import { ProcessLauncher } from "./process.js";
import { LaunchError, type Launcher, type LauncherDescription } from "./types.js";
import type { Logger } from "../../src/logging.js";
import { AgentHost, agentHostSupport } from "../agent-host/host.js";

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

/**
 * Who serves isolated sandboxes' agent API (--agent-mode): the agent host where asked or (auto) where it can run,
 * else an agent in each sandbox, with the reason. "host" demanded where it cannot run is a LaunchError.
 */
export function resolveAgentMode(mode: "auto" | "host" | "process", logger: Logger): { host?: AgentHost; mode: "host" | "process"; reason?: string } {
  if (mode === "process") return { mode: "process", reason: "--agent-mode process" };
  const support = agentHostSupport();
  if (!support.available) {
    if (mode === "host") throw new LaunchError(`--agent-mode host: ${support.reason}`);
    return { mode: "process", reason: support.reason };
  }
  return { host: new AgentHost(logger.child({ component: "agent-host" })), mode: "host" };
}

/** The launcher `--launcher <name>` selects. */
export function createLauncher(
  name: string,
  options: {
    agentMain?: string;
    network?: "outbound" | "none";
    warm?: number;
    swarm?: { constraints?: string[]; registry?: string };
    agents?: { mode: "auto" | "host" | "process"; logger: Logger };
  } = {},
): Launcher {
  switch (name) {
    case "process":
      return new ProcessLauncher({ agentMain: options.agentMain });
    case "bwrap": {
      const agents = options.agents ? resolveAgentMode(options.agents.mode, options.agents.logger) : { mode: "process" as const };
      return new BwrapLauncher({
        agentMain: options.agentMain,
        network: options.network,
        warm: options.warm,
        agentHost: agents.host,
        agentMode: { mode: agents.mode, reason: agents.reason },
      });
    }
    case "docker":
      return new DockerLauncher({ agentMain: options.agentMain });
    case "swarm":
      return new SwarmLauncher({ agentMain: options.agentMain, constraints: options.swarm?.constraints, registry: options.swarm?.registry });
    default:
      throw new LaunchError(`unknown launcher "${name}": expected one of ${LAUNCHER_NAMES.join(", ")}`);
  }
}
