/**
 * sandbox-kit's programmatic API, for test authors:
 *
 *   import { startSimulator } from "sandbox-kit";
 *   const sim = await startSimulator();          // a free port, in memory, isolated sandboxes (bwrap launcher)
 *   Object.assign(process.env, sim.env);         // BL_API_URL, BL_RUN_URL, BL_WORKSPACE, BL_API_KEY, ...
 *   ...                                          // @blaxel/core now talks to the simulator
 *   await sim.stop();                            // stops every sandbox's agent
 */
import type { SimConfig } from "./simulator/config.js";
import { serveSimulator } from "./simulator/serve.js";
import type { Launcher } from "./simulator/launcher/types.js";

export interface StartSimulatorOptions extends Partial<Omit<SimConfig, "port" | "launcher">> {
  /** Listen port; default 0 (a free one). */
  port?: number;
  /** "bwrap" (default: isolated), "process" (no isolation), "docker", or a Launcher. */
  launcher?: string | Launcher;
}

export interface StartedSimulator {
  url: string;
  /** The environment @blaxel/core reads: assign it to process.env before importing the SDK. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startSimulator(options: StartSimulatorOptions = {}): Promise<StartedSimulator> {
  const { launcher, ...config } = options;
  const served = await serveSimulator({ port: 0, logLevel: "warn", ...config }, { launcher });
  return { url: served.url, env: served.env, stop: served.stop };
}

export type { AgentExit, AgentHandle, Launcher, LaunchSpec, SandboxMount } from "./simulator/launcher/types.js";
