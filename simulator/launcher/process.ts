import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { AGENT_NODE_FLAGS, AGENT_TOKEN_FD, agentArgs, agentEnv, agentEnvWithoutToken, agentMainPath } from "./agent-main.js";
import { adoptChild, reapOrphan, startChild } from "./child.js";
import { connectOnHost } from "./port-handoff.js";
import type { WarmActivation } from "./warm-agent.js";
import { stopChild, WarmPool } from "./warm-pool.js";
import { LaunchError, type AgentHandle, type LaunchSpec, type Launcher, type LauncherDescription, type WarmPoolState } from "./types.js";

export interface ProcessLauncherOptions {
  /** Run this script as the agent instead of the compiled sandbox-agent (disables the warm pool). */
  agentMain?: string;
  readyTimeoutMs?: number;
  /**
   * Agents kept started ahead of need, modules loaded, waiting for a sandbox
   * (default 0; the simulator uses 1). Most of an agent's start-up is loading
   * Node modules, so a warm agent is ready in the time it takes to open its database.
   */
  warm?: number;
}

/**
 * The default launcher: the agent as a plain child process on a free loopback
 * port, confined by its own --root (path confinement, no kernel isolation).
 */
export class ProcessLauncher implements Launcher {
  readonly name = "process";
  /** Its sandboxes' processes are the host's, among everything else the simulator's user runs: nothing to stop as one. */
  readonly standby = "the process launcher has no sandbox of its own to stop (no isolation): its sandboxes never go to standby";

  describe(): LauncherDescription {
    return {
      launcher: this.name,
      isolated: false,
      detail: "NOT ISOLATED: sandbox commands run on the host as the simulator's user; only the filesystem API is confined",
    };
  }
  /**
   * Warm agents fit every spec with the same NODE_EXTRA_CA_CERTS (the key): the spec's paths, argv and the rest
   * of its environment come at activation, but Node reads that one variable at start-up only.
   */
  private readonly pool: WarmPool<ChildProcess, string>;

  constructor(private readonly options: ProcessLauncherOptions = {}) {
    this.pool = new WarmPool({
      size: options.agentMain ? 0 : (options.warm ?? 0),
      keyOf: (ca) => ca,
      spawn: (ca) => spawnWarmAgent(ca),
      child: (child) => child,
      discard: () => {}, // dead already, or disconnected: a warm agent without its launcher exits by itself
      stop: (child) => stopChild(child, "SIGTERM"),
    });
    this.pool.refill("");
  }

  async start(spec: LaunchSpec): Promise<AgentHandle> {
    // Without a mount namespace there is nowhere to put a volume: its mountPath would be the host's own path.
    if (spec.mounts?.length)
      throw new LaunchError(
        `the process launcher cannot mount volumes (spec.volumes: ${spec.mounts.map((m) => m.target).join(", ")}): use an isolating launcher (--launcher bwrap or docker)`,
      );
    mkdirSync(spec.rootDir, { recursive: true });
    mkdirSync(spec.dataDir, { recursive: true });
    const args = agentArgs({ root: spec.rootDir, dataDir: spec.dataDir, sandbox: spec.sandbox, logLevel: spec.logLevel, drivesDir: spec.drivesDir });
    const env = agentEnv(spec, spec.rootDir);
    const ca = spec.env?.NODE_EXTRA_CA_CERTS ?? "";
    const warm = await this.pool.take(ca);
    if (warm) {
      await reapOrphan(spec.dataDir);
      const activation: WarmActivation = { argv: args, env: env as Record<string, string> };
      try {
        return await adoptChild(
          warm,
          { command: "warm sandbox-agent", dataDir: spec.dataDir, readyTimeoutMs: this.options.readyTimeoutMs, openPort: connectOnHost },
          () => warm.send(activation),
        );
      } finally {
        this.pool.refill(ca); // after, not during: on a small machine the next warm-up would slow this start
      }
    }
    // Cold start: the token goes on a pipe, not in the environment every sandbox process could read in /proc.
    return startChild({
      command: process.execPath,
      args: [...AGENT_NODE_FLAGS, this.options.agentMain ?? agentMainPath(), ...args, "--token-fd", String(AGENT_TOKEN_FD)],
      env: agentEnvWithoutToken(spec, spec.rootDir),
      tokenOnFd3: spec.token,
      dataDir: spec.dataDir,
      readyTimeoutMs: this.options.readyTimeoutMs,
      // No network of its own: the simulator reaches the sandbox's ports as the agent would.
      openPort: connectOnHost,
    });
  }

  warmPool(): WarmPoolState {
    return this.pool.state();
  }

  /** Resolves once every idle warm agent has loaded its modules. */
  warmed(): Promise<void> {
    return this.pool.warmed();
  }

  /** Stops the idle warm agents (running ones belong to their sandboxes). */
  close(): Promise<void> {
    return this.pool.close();
  }
}

/** A warm agent (warm-agent.ts) waiting on IPC for its sandbox; undefined where the build has none. */
function spawnWarmAgent(ca: string): ChildProcess | undefined {
  const script = join(dirname(agentMainPath()), "../simulator/launcher/warm-agent.js");
  if (!existsSync(script)) return undefined;
  // A minimal environment until activation replaces it with the sandbox's, but for what Node reads at start-up.
  const env = agentEnv({ token: "", env: ca ? { NODE_EXTRA_CA_CERTS: ca } : undefined }, "/");
  const child = spawn(process.execPath, [...AGENT_NODE_FLAGS, script], { env, stdio: ["ignore", "pipe", "pipe", "ipc"] });
  child.on("error", () => {});
  return child;
}
