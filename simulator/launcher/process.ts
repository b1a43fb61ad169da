import { mkdirSync } from "node:fs";
import { agentArgs, agentEnv, agentMainPath } from "./agent-main.js";
import { startChild } from "./child.js";
import type { AgentHandle, LaunchSpec, Launcher } from "./types.js";

/**
 * The default launcher: the agent as a plain child process on a free loopback
 * port, confined by its own --root (path confinement, no kernel isolation).
 */
export class ProcessLauncher implements Launcher {
  readonly name = "process";
  constructor(private readonly options: { agentMain?: string; readyTimeoutMs?: number } = {}) {}

  start(spec: LaunchSpec): Promise<AgentHandle> {
    mkdirSync(spec.rootDir, { recursive: true });
    mkdirSync(spec.dataDir, { recursive: true });
    return startChild({
      command: process.execPath,
      args: [this.options.agentMain ?? agentMainPath(), ...agentArgs({ root: spec.rootDir, dataDir: spec.dataDir, sandbox: spec.sandbox, logLevel: spec.logLevel, drivesDir: spec.drivesDir })],
      env: agentEnv(spec, spec.rootDir),
      dataDir: spec.dataDir,
      readyTimeoutMs: this.options.readyTimeoutMs,
    });
  }
}
