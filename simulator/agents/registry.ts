import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { errors } from "../../src/errors.js";
import { AgentSupervisor, type Launcher, type SupervisorEvent, type SupervisorOptions } from "../launcher/index.js";
import type { SandboxTarget, Upstream } from "../proxy/index.js";

/**
 * The simulator's running sandboxes: one supervised agent per sandbox, with
 * its files under the simulator's data dir:
 *   <dir>/sandboxes/<workspace>/<sandbox>/root   the sandbox's filesystem
 *   <dir>/sandboxes/<workspace>/<sandbox>/agent  the agent's state
 *   <dir>/drives/<workspace>/<drive>             drives, shared by the workspace's sandboxes
 */

export interface SandboxAgentsOptions {
  launcher: Launcher;
  dir: string;
  /** Every supervisor event, for the sandbox's events and status. */
  onEvent?: (workspace: string, sandbox: string, event: SupervisorEvent) => void;
  supervisor?: Omit<SupervisorOptions, "onEvent">;
  logLevel?: string;
}

export interface StartOptions {
  env?: Record<string, string>;
  image?: string;
}

const key = (workspace: string, sandbox: string) => `${workspace}/${sandbox}`;

export class SandboxAgents {
  private readonly failures = new Map<string, string>();
  private readonly running = new Map<string, { supervisor: AgentSupervisor; token: string; startedAt: number; ready: Promise<void> }>();

  constructor(private readonly options: SandboxAgentsOptions) {}

  sandboxDir(workspace: string, sandbox: string): string {
    return join(this.options.dir, "sandboxes", workspace, sandbox);
  }

  drivesDir(workspace: string): string {
    return join(this.options.dir, "drives", workspace);
  }

  /** Starts (or returns the already running) agent of a sandbox; resolves once it is healthy. */
  async start(workspace: string, sandbox: string, opts: StartOptions = {}): Promise<AgentSupervisor> {
    const existing = this.running.get(key(workspace, sandbox));
    if (existing && existing.supervisor.state !== "failed" && existing.supervisor.state !== "stopped") return existing.supervisor;
    const dir = this.sandboxDir(workspace, sandbox);
    mkdirSync(dir, { recursive: true });
    const token = randomBytes(24).toString("base64url");
    const supervisor = new AgentSupervisor(
      this.options.launcher,
      { workspace, sandbox, rootDir: join(dir, "root"), dataDir: join(dir, "agent"), token, env: opts.env, image: opts.image, drivesDir: this.drivesDir(workspace), logLevel: this.options.logLevel },
      { ...this.options.supervisor, onEvent: (event) => this.options.onEvent?.(workspace, sandbox, event) },
    );
    const ready = supervisor.start();
    this.running.set(key(workspace, sandbox), { supervisor, token, startedAt: Date.now(), ready: ready.catch(() => {}) });
    try {
      await ready;
    } catch (err) {
      if (this.running.get(key(workspace, sandbox))?.supervisor === supervisor) this.running.delete(key(workspace, sandbox));
      this.failures.set(key(workspace, sandbox), (err as Error).message);
      throw err;
    }
    return supervisor;
  }

  /**
   * Starts the agent without waiting (the control plane answers create at
   * once); requests for the sandbox wait for it in upstream(). A failure is
   * reported through onEvent as a crash that gave up.
   */
  begin(workspace: string, sandbox: string, opts: StartOptions = {}): void {
    this.failures.delete(key(workspace, sandbox));
    this.start(workspace, sandbox, opts).catch((err: Error) => {
      this.options.onEvent?.(workspace, sandbox, { type: "crashed", exit: { code: null, signal: null, stderr: err.message }, restartInMs: null, attempt: 0 });
    });
  }

  /**
   * Waits for the sandbox's agent begun by begin(): undefined once it is
   * healthy, else why it is not (the failure is also in the sandbox's events).
   */
  async ensure(workspace: string, sandbox: string): Promise<string | undefined> {
    const entry = this.running.get(key(workspace, sandbox));
    if (!entry) return this.failures.get(key(workspace, sandbox)) ?? "not started";
    await entry.ready;
    const state = this.running.get(key(workspace, sandbox))?.supervisor.state;
    return state === "running" ? undefined : (this.failures.get(key(workspace, sandbox)) ?? `agent is ${state ?? "gone"}`);
  }

  /** Stops the agent, then removes the sandbox's files (delete); errors are reported, not thrown. */
  retire(workspace: string, sandbox: string, onError: (err: Error) => void = () => {}): void {
    this.stop(workspace, sandbox)
      .then(() => this.removeFiles(workspace, sandbox))
      .catch(onError);
  }

  get(workspace: string, sandbox: string): AgentSupervisor | undefined {
    return this.running.get(key(workspace, sandbox))?.supervisor;
  }

  /** Milliseconds the sandbox's agent has been running (for usage metering); 0 when not running. */
  uptimeMs(workspace: string, sandbox: string): number {
    const entry = this.running.get(key(workspace, sandbox));
    return entry ? Date.now() - entry.startedAt : 0;
  }

  /** Stops the agent (SIGTERM, then SIGKILL); its files stay until removeFiles. */
  async stop(workspace: string, sandbox: string): Promise<void> {
    const entry = this.running.get(key(workspace, sandbox));
    if (!entry) return;
    this.running.delete(key(workspace, sandbox));
    await entry.supervisor.stop();
  }

  /**
   * Removes a stopped sandbox's files. Refuses while anything is mounted
   * under it: deleting through a bind-mounted drive would delete the drive's files.
   */
  removeFiles(workspace: string, sandbox: string): void {
    if (this.running.has(key(workspace, sandbox))) throw errors.conflict(`sandbox "${sandbox}" is still running`);
    const dir = this.sandboxDir(workspace, sandbox);
    const mounted = readFileSync("/proc/self/mountinfo", "utf8").split("\n").map((l) => l.split(" ")[4] ?? "").filter((m) => m === dir || m.startsWith(`${dir}/`));
    if (mounted.length > 0) throw errors.conflict(`sandbox "${sandbox}" still has mounts (${mounted.join(", ")}): unmount its drives first`);
    rmSync(dir, { recursive: true, force: true });
  }

  /** The proxy's upstream: waits for a starting agent; 404 for an unknown sandbox, 503 naming it while its agent is down. */
  async upstream(target: SandboxTarget): Promise<Upstream> {
    const entry = this.running.get(key(target.workspace, target.sandbox));
    if (entry?.supervisor.state === "starting") await entry.ready;
    if (!entry) throw errors.notFound(`sandbox "${target.sandbox}" not found in workspace "${target.workspace}" (or not running)`);
    const url = entry.supervisor.url;
    if (!url) throw errors.serviceUnavailable(`sandbox "${target.sandbox}" in workspace "${target.workspace}" is unavailable: its agent is ${entry.supervisor.state}`);
    return { url, token: entry.token };
  }

  async stopAll(): Promise<void> {
    const all = [...this.running.keys()];
    await Promise.all(all.map((k) => {
      const [workspace, sandbox] = k.split("/") as [string, string];
      return this.stop(workspace, sandbox);
    }));
    await this.options.launcher.close?.();
  }
}
