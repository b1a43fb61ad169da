import { join } from "node:path";
import { errors } from "../../src/errors.js";
import type { Logger } from "../../src/logging.js";
import { agentFetch } from "../launcher/endpoint.js";
import {
  AgentSupervisor,
  StartQueue,
  type Launcher,
  type SupervisorEvent,
  type SupervisorOptions,
  type LauncherNode,
  type WarmPoolState,
} from "../launcher/index.js";
import { removeTree } from "../launcher/types.js";
import type { LaunchSpec } from "../launcher/types.js";
import type { SandboxTarget, Upstream } from "../proxy/index.js";
import type { SandboxImageSource } from "../images/sandbox-images.js";
import { RetiredSandboxes } from "./retention.js";
import { SnapshotFiles } from "./snapshot-files.js";
import { StandbyController } from "../standby/controller.js";
import type { StandbyState } from "../standby/idle.js";

/**
 * What the simulator knows of its running sandboxes (registry.ts is the whole): each one's supervised agent and
 * token, deletions and lifecycle changes in progress, last use, standby; the sandboxes' directories; and the
 * reads the proxy and the control plane make (upstream, get, uptime). Starting agents and stopping them are the
 * subclasses' (registry-lifecycle.ts, registry.ts).
 */

export interface SandboxAgentsOptions {
  launcher: Launcher;
  dir: string;
  /** Every supervisor event, for the sandbox's events and status. */
  onEvent?: (workspace: string, sandbox: string, event: SupervisorEvent) => void;
  supervisor?: Omit<SupervisorOptions, "onEvent">;
  /** Each request for a sandbox through the proxy (its last use: ttl-idle expiry, lastUsedAt). */
  onUse?: (workspace: string, sandbox: string) => void;
  logLevel?: string;
  /** How long a deleted sandbox's files are kept (--sandbox-retention); default 0, removed at once. */
  retentionMs?: number;
  /** The simulator's clock: retention is due on it (test hooks move it). Default Date.now. */
  now?: () => number;
  /** Real time between sweeps of retired sandboxes (default 60 s; 0 = only on demand, sweep()). */
  sweepEveryMs?: number;
  logger?: Logger;
  /** Resolves spec.runtime.image to a root filesystem before each launch (LaunchSpec.imageRootDir); absent = the launcher's own root. */
  images: SandboxImageSource;
  /** Before each launch with volumes: brings each volume to its spec.size (a growth that had to wait is applied then). */
  prepareVolumes?: (workspace: string, sandbox: string, volumes: string[]) => Promise<void>;
  /** Admission control: how many agents start at once, the rest wait in arrival order (default: one per core, at least two). */
  startQueue?: StartQueue;
  /** Idle time before a sandbox goes to standby (--standby-after, real time); 0 or absent = never by itself (the hook still can). */
  standbyAfterMs?: number;
  /** Each change between RUNNING and STANDBY (usage metering). */
  onStandby?: (workspace: string, sandbox: string, state: StandbyState) => void;
  /** The simulator's egress (simulator/egress), used where the launcher has `egress`. */
  egress?: {
    launchFor(workspace: string, sandbox: string): { spec: NonNullable<LaunchSpec["egress"]>; env: Record<string, string> };
    /** Whether the sandbox may keep its direct outbound path (its policy restricts no destination). */
    directAllowed(workspace: string, sandbox: string): boolean;
    /** Whether the sandbox's spec.network asks for anything (domains or routing rules). */
    hasPolicy(workspace: string, sandbox: string): boolean;
  };
}

export type Entry = { supervisor: AgentSupervisor; token: string; startedAt: number; ready: Promise<void> };

export const key = (workspace: string, sandbox: string) => `${workspace}/${sandbox}`;
/** Workspace names have no "/": the first one splits a key. */
export const splitKey = (k: string): [string, string] => [k.slice(0, k.indexOf("/")), k.slice(k.indexOf("/") + 1)];

export class SandboxAgentsState {
  protected readonly failures = new Map<string, string>();
  protected readonly running = new Map<string, Entry>();
  /** Deletions in progress (agent stopping, files moving aside): a new sandbox of the same name waits for them. */
  protected readonly retiring = new Map<string, Promise<void>>();
  /** Lifecycle changes in progress, per sandbox (exclusive()). */
  protected readonly changing = new Map<string, Promise<void>>();
  /** When each sandbox last served a request through the proxy (simulator clock): ttl-idle expiry reads it. */
  protected readonly lastUsed = new Map<string, number>();
  readonly retired: RetiredSandboxes;
  readonly snapshots: SnapshotFiles;
  readonly startQueue: StartQueue;
  /** The agents stopAll() is stopping: a forced exit kills what is left of them (killAll). */
  protected shuttingDown: AgentSupervisor[] = [];
  /** Idle sandboxes stopped in place (simulator/standby); absent when they never sleep. */
  readonly standby?: StandbyController;

  constructor(protected readonly options: SandboxAgentsOptions) {
    this.startQueue = options.startQueue ?? new StartQueue();
    const launcher = options.launcher;
    this.snapshots = new SnapshotFiles(
      options.dir,
      (path) => removeTree(path, launcher),
      launcher?.copyTree ? (source, target) => launcher.copyTree!(source, target) : undefined,
    );
    this.retired = new RetiredSandboxes(options.dir, options.now ?? Date.now, options.logger, options.launcher);
    this.retired.sweep(); // what came due while a --data simulator was down
    if ((options.sweepEveryMs ?? 60_000) > 0) this.retired.startSweeping(options.sweepEveryMs ?? 60_000);
    // With --standby-after 0 sandboxes never sleep by themselves; the test hook can still put one to sleep.
    if (options.launcher.standby === true) {
      this.standby = new StandbyController({
        afterMs: options.standbyAfterMs ?? 0,
        agent: (k) => this.running.get(k)?.supervisor,
        agentJson: (k, path) => this.agentJson(k, path),
        onChange: (k, state) => {
          const [workspace, sandbox] = splitKey(k);
          options.logger?.info({ workspace, sandbox, state }, "sandbox standby");
          options.onStandby?.(workspace, sandbox, state);
        },
        logger: options.logger,
      });
    }
  }

  /** A GET on the sandbox's running agent with its token (standby asks it for keepAlive processes and schedules). */
  protected async agentJson(k: string, path: string): Promise<unknown> {
    const entry = this.running.get(k);
    const endpoint = entry?.supervisor.endpoint;
    if (!entry || !endpoint) throw new Error("the agent is not running");
    const res = await agentFetch(endpoint, { path, headers: { authorization: `Bearer ${entry.token}` }, timeoutMs: 5_000 });
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
    return JSON.parse(res.text) as unknown;
  }

  /** RUNNING or STANDBY while the sandbox's agent runs; undefined otherwise. */
  standbyState(workspace: string, sandbox: string): StandbyState | undefined {
    const supervisor = this.get(workspace, sandbox);
    if (supervisor?.state !== "running") return undefined;
    return this.standby?.state(key(workspace, sandbox)) ?? "RUNNING";
  }

  /** The test hook: the sandbox sleeps now whatever keeps it awake (true once it does), or wakes now. */
  async setStandby(workspace: string, sandbox: string, state: StandbyState): Promise<boolean> {
    if (!this.standby) return false;
    if (state === "STANDBY") return this.standby.sleep(key(workspace, sandbox), true);
    await this.standby.wake(key(workspace, sandbox));
    return true;
  }

  /** A request through the proxy is open: the sandbox stays awake until the returned release is called. */
  inUse(target: SandboxTarget): () => void {
    return this.standby?.open(key(target.workspace, target.sandbox)) ?? (() => {});
  }

  /** The simulator's directory for sandbox files (volumes live under it too). */
  get dir(): string {
    return this.options.dir;
  }

  sandboxDir(workspace: string, sandbox: string): string {
    return join(this.options.dir, "sandboxes", workspace, sandbox);
  }

  rootDir(workspace: string, sandbox: string): string {
    return join(this.sandboxDir(workspace, sandbox), "root");
  }

  drivesDir(workspace: string): string {
    return join(this.options.dir, "drives", workspace);
  }

  /** Removes the retired sandboxes whose retention period has ended (the sweeper's job, callable at any time). */
  sweep(): { workspace: string; sandbox: string }[] {
    return this.retired.sweep().map(({ workspace, sandbox }) => ({ workspace, sandbox }));
  }

  /** When the sandbox last served a request through the proxy (simulator clock), if it did since this simulator started. */
  lastUsedMs(workspace: string, sandbox: string): number | undefined {
    return this.lastUsed.get(key(workspace, sandbox));
  }

  /** The machines the launcher runs sandboxes on, where it has several (/health). */
  launcherNodes(): LauncherNode[] | undefined {
    return this.options.launcher.nodes?.();
  }

  /** The launcher's warm pool, where it keeps one (/health). */
  warmPool(): WarmPoolState | undefined {
    return this.options.launcher.warmPool?.();
  }

  get(workspace: string, sandbox: string): AgentSupervisor | undefined {
    return this.running.get(key(workspace, sandbox))?.supervisor;
  }

  /** Milliseconds the sandbox's agent has been running (for usage metering); 0 when not running. */
  uptimeMs(workspace: string, sandbox: string): number {
    const entry = this.running.get(key(workspace, sandbox));
    return entry ? Date.now() - entry.startedAt : 0;
  }

  /**
   * Runs one lifecycle change of a sandbox (archive, deactivate, restart...)
   * after the previous one has finished, so two concurrent requests never
   * interleave a stop and a start of the same agent.
   */
  exclusive<T>(workspace: string, sandbox: string, change: () => Promise<T>): Promise<T> {
    const k = key(workspace, sandbox);
    const run = (this.changing.get(k) ?? Promise.resolve()).then(change);
    const settled = run.then(
      () => {},
      () => {},
    );
    this.changing.set(k, settled);
    void settled.then(() => {
      if (this.changing.get(k) === settled) this.changing.delete(k);
    });
    return run;
  }

  /** The proxy's upstream: waits for a starting agent; 404 for an unknown sandbox, 503 naming it while its agent is down. */
  async upstream(target: SandboxTarget): Promise<Upstream> {
    const entry = this.running.get(key(target.workspace, target.sandbox));
    if (entry) {
      this.lastUsed.set(key(target.workspace, target.sandbox), (this.options.now ?? Date.now)());
      this.options.onUse?.(target.workspace, target.sandbox);
    }
    if (entry?.supervisor.state === "starting") await entry.ready;
    // A sandbox in standby resumes before it is served: the caller sees a normal answer, a little later.
    if (entry) await this.standby?.wake(key(target.workspace, target.sandbox));
    if (!entry) throw errors.notFound(`sandbox "${target.sandbox}" not found in workspace "${target.workspace}" (or not running)`);
    const endpoint = entry.supervisor.endpoint;
    if (!endpoint)
      throw errors.serviceUnavailable(`sandbox "${target.sandbox}" in workspace "${target.workspace}" is unavailable: its agent is ${entry.supervisor.state}`);
    return { ...endpoint, token: entry.token, openPort: entry.supervisor.openPort };
  }
}
