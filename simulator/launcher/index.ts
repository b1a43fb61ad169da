import { BwrapLauncher } from "./bwrap.js";
import { DockerLauncher } from "./docker.js";
import { ProcessLauncher } from "./process.js";
import { LaunchError, type Launcher } from "./types.js";

export type { AgentExit, AgentHandle, LaunchSpec, Launcher } from "./types.js";
export { LaunchError } from "./types.js";
export { AgentSupervisor, type AgentState, type SupervisorEvent, type SupervisorOptions } from "./supervisor.js";
export { ProcessLauncher } from "./process.js";
export { BwrapLauncher, bwrapPath } from "./bwrap.js";
export { DockerLauncher, dockerPath, dockerUnavailable } from "./docker.js";

export const LAUNCHER_NAMES = ["process", "bwrap", "docker"] as const;
export type LauncherName = (typeof LAUNCHER_NAMES)[number];

/** The launcher `--launcher <name>` selects. */
export function createLauncher(name: string, options: { agentMain?: string } = {}): Launcher {
  switch (name) {
    case "process":
      return new ProcessLauncher(options);
    case "bwrap":
      return new BwrapLauncher(options);
    case "docker":
      return new DockerLauncher(options);
    default:
      throw new LaunchError(`unknown launcher "${name}": expected one of ${LAUNCHER_NAMES.join(", ")}`);
  }
}
