import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { AGENT_NODE_FLAGS, AGENT_TOKEN_FD, agentArgs, agentEnv, agentEnvWithoutToken, agentMainPath } from "./agent-main.js";
import { adoptChild, reapOrphan, startChild } from "./child.js";
import { connectOnHost } from "./port-handoff.js";
import type { WarmActivation } from "./warm-agent.js";
import { LaunchError, type AgentHandle, type LaunchSpec, type Launcher, type LauncherDescription, type WarmPoolState } from "./types.js";

interface WarmChild {
  child: ChildProcess;
  /** Resolves when the warm agent has loaded its modules; false when it died first. */
  ready: Promise<boolean>;
}

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
  private readonly idle: WarmChild[] = [];
  private closed = false;

  constructor(private readonly options: ProcessLauncherOptions = {}) {
    this.refill();
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
    const warm = await this.takeWarm();
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
        this.refill(); // after, not during: on a small machine the next warm-up would slow this start
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
    return {
      size: this.options.agentMain ? 0 : (this.options.warm ?? 0),
      idle: this.idle.length,
      pids: this.idle.flatMap((w) => (w.child.pid ? [w.child.pid] : [])),
    };
  }

  /** Resolves once every idle warm agent has loaded its modules. */
  async warmed(): Promise<void> {
    await Promise.all(this.idle.map((w) => w.ready));
  }

  /** Stops the idle warm agents (running ones belong to their sandboxes). */
  async close(): Promise<void> {
    this.closed = true;
    const idle = this.idle.splice(0);
    await Promise.all(
      idle.map(
        ({ child }) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once("exit", () => resolve());
            child.kill("SIGTERM");
          }),
      ),
    );
  }

  /** The oldest warm agent, waiting for it to finish loading if need be (still sooner than a cold start). */
  private async takeWarm(): Promise<ChildProcess | undefined> {
    while (this.idle.length > 0) {
      const { child, ready } = this.idle.shift()!;
      if ((await ready) && child.exitCode === null && child.signalCode === null && child.connected) return child;
    }
    return undefined;
  }

  private refill(): void {
    const wanted = this.options.agentMain ? 0 : (this.options.warm ?? 0);
    while (!this.closed && this.idle.length < wanted) {
      const script = join(dirname(agentMainPath()), "../simulator/launcher/warm-agent.js");
      if (!existsSync(script)) return;
      // A minimal environment until activation replaces it with the sandbox's.
      const child = spawn(process.execPath, [...AGENT_NODE_FLAGS, script], { env: agentEnv({ token: "" }, "/"), stdio: ["ignore", "pipe", "pipe", "ipc"] });
      child.on("error", () => {});
      const ready = new Promise<boolean>((resolve) => {
        child.once("message", () => resolve(true));
        child.once("exit", () => resolve(false));
      });
      child.once("exit", () => {
        const at = this.idle.findIndex((w) => w.child === child);
        if (at !== -1) this.idle.splice(at, 1);
      });
      this.idle.push({ child, ready });
    }
  }
}
