import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { errors } from "../../src/errors.js";
import { settledWithin } from "../../src/settled.js";
import type { Logger } from "../../src/logging.js";
import { agentFetch } from "../launcher/endpoint.js";
import { AgentSupervisor, StartQueue, type Launcher, type SupervisorEvent, type SupervisorOptions, type WarmPoolState } from "../launcher/index.js";
import { removeTree } from "../launcher/types.js";
import type { LaunchSpec } from "../launcher/types.js";
import type { SandboxTarget, Upstream } from "../proxy/index.js";
import type { ImageService } from "../images/recipes.js";
import { startImageServices, type SandboxImages } from "../images/sandbox-images.js";
import { mountsUnder, RetiredSandboxes } from "./retention.js";
import { SnapshotFiles } from "./snapshot-files.js";
import { removeWorkspaceVolumes, volumeMounts, type VolumeAttachment } from "./volumes.js";
import { StandbyController } from "../standby/controller.js";
import type { StandbyState } from "../standby/idle.js";

/**
 * The simulator's running sandboxes: one supervised agent per sandbox, with
 * its files under the simulator's data dir:
 *   <dir>/sandboxes/<workspace>/<sandbox>/root   the sandbox's filesystem
 *   <dir>/sandboxes/<workspace>/<sandbox>/agent  the agent's state
 *   <dir>/drives/<workspace>/<drive>             drives, shared by the workspace's sandboxes
 *   <dir>/volumes/<workspace>/<volume>           volumes, mounted at their spec.volumes mountPath (volumes.ts)
 *   <dir>/retired/<workspace>/<sandbox>@<due>     a deleted sandbox's files, until the retention period ends
 *   <dir>/snapshots/<workspace>/<snapshot id>     a snapshot's copy of a sandbox's root (snapshot-files.ts)
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
  images?: SandboxImages;
  /** Before each launch with volumes: brings each volume to its spec.size (a growth that had to wait is applied then). */
  prepareVolumes?: (workspace: string, sandbox: string, volumes: string[]) => void;
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

type Entry = { supervisor: AgentSupervisor; token: string; startedAt: number; ready: Promise<void> };

export interface StartOptions {
  env?: Record<string, string>;
  image?: string;
  /** spec.volumes: each becomes a mount of the volume's directory (LaunchSpec.mounts). */
  volumes?: VolumeAttachment[];
  /** spec.runtime.memory (MB): the sandbox's memory limit where the launcher can enforce one. */
  memoryMb?: number;
  /** A fork: the sandbox's root starts as a copy of this sandbox's files (same workspace). */
  copyFilesOf?: string;
  /** A fork of a snapshot: the sandbox's root starts as a copy of that snapshot's files (same workspace). */
  fromSnapshot?: string;
}

const key = (workspace: string, sandbox: string) => `${workspace}/${sandbox}`;
/** Workspace names have no "/": the first one splits a key. */
const splitKey = (k: string): [string, string] => [k.slice(0, k.indexOf("/")), k.slice(k.indexOf("/") + 1)];

export class SandboxAgents {
  private readonly failures = new Map<string, string>();
  private readonly running = new Map<string, Entry>();
  /** Deletions in progress (agent stopping, files moving aside): a new sandbox of the same name waits for them. */
  private readonly retiring = new Map<string, Promise<void>>();
  /** Lifecycle changes in progress, per sandbox (exclusive()). */
  private readonly changing = new Map<string, Promise<void>>();
  /** When each sandbox last served a request through the proxy (simulator clock): ttl-idle expiry reads it. */
  private readonly lastUsed = new Map<string, number>();
  readonly retired: RetiredSandboxes;
  readonly snapshots: SnapshotFiles;
  readonly startQueue: StartQueue;
  /** The agents stopAll() is stopping: a forced exit kills what is left of them (killAll). */
  private shuttingDown: AgentSupervisor[] = [];
  /** Idle sandboxes stopped in place (simulator/standby); absent when they never sleep. */
  readonly standby?: StandbyController;

  constructor(private readonly options: SandboxAgentsOptions) {
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
  private async agentJson(k: string, path: string): Promise<unknown> {
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

  /** Lets the launcher get ready for the workspace's sandboxes (a warm isolated sandbox) before the first create. */
  prepare(workspace: string): void {
    const dir = this.sandboxDir(workspace, "prepared");
    const egress = this.options.launcher.egress ? this.options.egress?.launchFor(workspace, "prepared") : undefined;
    // The egress environment too: a warm sandbox fits the specs whose agent starts with the same CA (bwrap-warm.ts).
    this.options.launcher.prepare?.({
      workspace,
      sandbox: "prepared",
      rootDir: join(dir, "root"),
      dataDir: join(dir, "agent"),
      token: "",
      drivesDir: this.drivesDir(workspace),
      logLevel: this.options.logLevel,
      egress: egress?.spec,
      env: egress?.env,
    });
  }

  /**
   * The sandbox's spec.network as it is now, applied to its running agent: the egress proxy reads the policy
   * per request by itself; what changes here is whether the sandbox keeps a direct path out (none while its
   * policy restricts destinations). Resolves once applied (slirp4netns stopped or attached).
   */
  async applyNetwork(workspace: string, sandbox: string): Promise<void> {
    const set = this.running.get(key(workspace, sandbox))?.supervisor.setDirectOutbound;
    if (!set || !this.options.egress) return;
    await set(this.options.egress.directAllowed(workspace, sandbox)).catch((err: Error) =>
      this.options.logger?.warn({ workspace, sandbox, err: err.message }, "applying the sandbox's network failed"),
    );
  }

  /** Starts (or returns the already running) agent of a sandbox; resolves once it is healthy. */
  async start(workspace: string, sandbox: string, opts: StartOptions = {}): Promise<AgentSupervisor> {
    const existing = this.running.get(key(workspace, sandbox));
    if (existing && existing.supervisor.state !== "failed" && existing.supervisor.state !== "stopped") return existing.supervisor;
    const dir = this.sandboxDir(workspace, sandbox);
    const token = randomBytes(24).toString("base64url");
    const mounts = volumeMounts(this.options.dir, workspace, opts.volumes);
    // A volume created while the simulator ran without agents (records only) gets its directory now.
    for (const m of mounts) mkdirSync(m.source, { recursive: true });
    const image = { services: [] as ImageService[] }; // the image's processes (its entrypoint's), started with each agent
    const egress = this.options.launcher.egress ? this.options.egress?.launchFor(workspace, sandbox) : undefined;
    if (!this.options.launcher.egress && this.options.egress?.hasPolicy(workspace, sandbox)) {
      this.options.logger?.warn(
        { workspace, sandbox, launcher: this.options.launcher.name },
        "this launcher cannot enforce spec.network (no network of the sandbox's own): its policy and routing rules are not applied",
      );
    }
    const supervisor = new AgentSupervisor(
      this.options.launcher,
      {
        workspace,
        sandbox,
        rootDir: join(dir, "root"),
        dataDir: join(dir, "agent"),
        token,
        env: egress ? { ...egress.env, ...opts.env } : opts.env,
        egress: egress?.spec,
        image: opts.image,
        memoryMb: opts.memoryMb,
        drivesDir: this.drivesDir(workspace),
        logLevel: this.options.logLevel,
        mounts: mounts.length > 0 ? mounts : undefined,
      },
      {
        ...this.options.supervisor,
        onEvent: (event) => {
          if (event.type === "started" || event.type === "restarted") this.standby?.add(key(workspace, sandbox));
          else if (event.type !== "queued") this.standby?.remove(key(workspace, sandbox));
          this.options.onEvent?.(workspace, sandbox, event);
          if (event.type === "restarted") void this.applyNetwork(workspace, sandbox);
          if (event.type === "restarted")
            void startImageServices(
              { url: event.url, socketPath: event.socketPath },
              token,
              image.services,
              this.options.logger?.child({ workspace, sandbox }),
            );
        },
      },
    );
    // A sandbox of the same name being deleted: its agent stops and its files move aside first.
    const ready = (this.retiring.get(key(workspace, sandbox)) ?? Promise.resolve()).then(async () => {
      if (supervisor.state === "stopped") throw new Error("stopped before it started");
      mkdirSync(dir, { recursive: true });
      if (opts.volumes?.length && this.options.prepareVolumes) {
        // A deleted sandbox of the workspace still stopping may hold one of these volumes: an offline growth waits for it.
        await Promise.allSettled([...this.retiring].filter(([k]) => k.startsWith(`${workspace}/`)).map(([, done]) => done));
        this.options.prepareVolumes(
          workspace,
          sandbox,
          opts.volumes.map((v) => v.name!),
        );
      }
      if (opts.copyFilesOf) this.copyRoot(workspace, opts.copyFilesOf, sandbox);
      if (opts.fromSnapshot) await this.snapshots.restoreInto(workspace, opts.fromSnapshot, join(dir, "root"));
      if (this.options.images) image.services = await this.options.images.prepareLaunch(supervisor.spec, opts.image);
      // Stopped (deleted) while its image was being built: no launch.
      if ((supervisor.state as string) === "stopped") throw new Error("stopped before it started");
      // Admission: the launch (and with it the launcher's readiness deadline) begins once a slot is free.
      let reported = false;
      await this.startQueue.run(
        async () => {
          if ((supervisor.state as string) === "stopped") throw new Error("stopped before it started");
          await supervisor.start();
        },
        (ahead) => {
          // Reported when it starts waiting, then every tenth place and when next in line: a sandbox's
          // events say where it stands without a hundred-sandbox burst writing thousands of them.
          if (!reported || ahead % 10 === 0) this.options.onEvent?.(workspace, sandbox, { type: "queued", ahead, running: this.startQueue.running });
          reported = true;
        },
      );
      const endpoint = supervisor.endpoint;
      if (endpoint) await startImageServices(endpoint, token, image.services, this.options.logger?.child({ workspace, sandbox }));
    });
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

  /**
   * Delete: unmounts the sandbox's drives (a bind mount would outlive its
   * agent), stops the agent (SIGTERM, then SIGKILL), and moves its files
   * aside until the retention period ends (removed by the sweeper; at once
   * with retention 0). Errors are reported, not thrown.
   */
  retire(workspace: string, sandbox: string, onError: (err: Error) => void = () => {}): void {
    const k = key(workspace, sandbox);
    const entry = this.running.get(k);
    this.lastUsed.delete(k);
    this.running.delete(k); // from now on the name is free: a new start waits for this retirement
    const previous = this.retiring.get(k) ?? Promise.resolve();
    const done: Promise<void> = previous
      .then(async () => {
        if (entry) {
          await this.standby?.wake(k, entry.supervisor); // its agent unmounts the drives: it runs again first
          this.standby?.remove(k);
          await unmountDrives(entry).catch((err: Error) =>
            this.options.logger?.warn({ workspace, sandbox, err: err.message }, "could not unmount the sandbox's drives"),
          );
          await entry.supervisor.stop();
        }
        const dir = this.sandboxDir(workspace, sandbox);
        if (!existsSync(dir)) return;
        const retention = this.options.retentionMs ?? 0;
        this.retired.retire(workspace, sandbox, dir, (this.options.now ?? Date.now)() + retention);
        if (retention <= 0) this.retired.sweep();
      })
      .catch(onError)
      .finally(() => {
        if (this.retiring.get(k) === done) this.retiring.delete(k);
      });
    this.retiring.set(k, done);
  }

  /** Copies one sandbox's files into another's root, leaving out what is mounted there (drives stay shared, not copied). */
  private copyRoot(workspace: string, from: string, to: string): void {
    const source = join(this.sandboxDir(workspace, from), "root");
    if (!existsSync(source)) return;
    const mounted = new Set(mountsUnder(source));
    cpSync(source, join(this.sandboxDir(workspace, to), "root"), { recursive: true, verbatimSymlinks: true, filter: (path) => !mounted.has(path) });
  }

  /** Removes the retired sandboxes whose retention period has ended (the sweeper's job, callable at any time). */
  sweep(): { workspace: string; sandbox: string }[] {
    return this.retired.sweep().map(({ workspace, sandbox }) => ({ workspace, sandbox }));
  }

  /** When the sandbox last served a request through the proxy (simulator clock), if it did since this simulator started. */
  lastUsedMs(workspace: string, sandbox: string): number | undefined {
    return this.lastUsed.get(key(workspace, sandbox));
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
   * Stops the agent (SIGTERM, then SIGKILL); its files stay (archive,
   * deactivate, a restart with a new environment). Its drives are unmounted
   * first: a bind mount would outlive its agent.
   */
  async stop(workspace: string, sandbox: string): Promise<void> {
    const entry = this.running.get(key(workspace, sandbox));
    if (!entry) return;
    this.running.delete(key(workspace, sandbox));
    await entry.ready;
    await this.standby?.wake(key(workspace, sandbox), entry.supervisor); // its agent unmounts the drives: it runs again first
    this.standby?.remove(key(workspace, sandbox));
    await unmountDrives(entry).catch((err: Error) =>
      this.options.logger?.warn({ workspace, sandbox, err: err.message }, "could not unmount the sandbox's drives"),
    );
    await entry.supervisor.stop();
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

  /** Workspace deletion: every sandbox's agent is stopped and retired, then the workspace's drives are removed. */
  retireWorkspace(workspace: string, sandboxes: string[], onError: (err: Error) => void = () => {}): Promise<void> {
    for (const sandbox of sandboxes) this.retire(workspace, sandbox, onError);
    const pending = sandboxes.map((s) => this.retiring.get(key(workspace, s))).filter((p): p is Promise<void> => p !== undefined);
    return Promise.allSettled(pending).then(() => {
      try {
        const left = mountsUnder(this.drivesDir(workspace));
        if (left.length > 0) throw new Error(`drives of workspace "${workspace}" still mounted (${left.join(", ")})`);
        removeTree(this.drivesDir(workspace), this.options.launcher);
        removeWorkspaceVolumes(this.options.dir, workspace);
        this.snapshots.removeWorkspace(workspace);
      } catch (err) {
        onError(err as Error);
      }
    });
  }

  /**
   * Removes a stopped sandbox's files. Refuses while anything is mounted
   * under it: deleting through a bind-mounted drive would delete the drive's files.
   */
  removeFiles(workspace: string, sandbox: string): void {
    if (this.running.has(key(workspace, sandbox))) throw errors.conflict(`sandbox "${sandbox}" is still running`);
    const dir = this.sandboxDir(workspace, sandbox);
    const mounted = mountsUnder(dir);
    if (mounted.length > 0) throw errors.conflict(`sandbox "${sandbox}" still has mounts (${mounted.join(", ")}): unmount its drives first`);
    removeTree(dir, this.options.launcher);
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

  /**
   * The simulator's shutdown: every agent stops at once (SIGTERM, SIGKILL after `graceMs`), without waiting
   * for starts or deletions in progress beyond `deadlineMs`; whatever is still starting then is left to die
   * with the simulator (the launcher's processes end with their parent).
   */
  async stopAll(graceMs = 3_000, deadlineMs = 6_000): Promise<void> {
    this.retired.stopSweeping();
    this.standby?.close();
    const entries = [...this.running.entries()];
    // Sleeping sandboxes go on first: their agents unmount drives and take SIGTERM.
    await Promise.all(entries.map(([k, entry]) => this.standby?.wake(k, entry.supervisor)));
    this.running.clear();
    this.shuttingDown = entries.map(([, entry]) => entry.supervisor);
    const stops = entries.map(async ([k, entry]) => {
      await unmountDrives(entry, 2_000).catch((err: Error) =>
        this.options.logger?.warn({ sandbox: k, err: err.message }, "could not unmount the sandbox's drives"),
      );
      await entry.supervisor.stop(graceMs);
    });
    const late = await settledWithin([...stops, ...this.retiring.values()], deadlineMs);
    if (late > 0)
      this.options.logger?.warn({ sandboxes: late, deadlineMs }, "shutdown: sandboxes still stopping or starting are left to end with the simulator");
    await settledWithin([this.options.launcher.close?.()], 2_000);
  }

  /**
   * A forced exit (a second signal, or a shutdown past its deadline): SIGKILL to every agent's process now,
   * synchronously, so nothing writes into the sandboxes' files while they are removed. Their sandboxes end
   * with them (the isolating launcher's processes die with their parent).
   */
  killAll(): void {
    for (const supervisor of [...[...this.running.values()].map((e) => e.supervisor), ...this.shuttingDown]) {
      const pid = supervisor.pid;
      if (pid === undefined) continue;
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
}

/** Lazily unmounts every drive the agent has mounted (DELETE /drives/mount/{path}?force=true). */
async function unmountDrives(entry: Entry, timeoutMs = 5_000): Promise<void> {
  const endpoint = entry.supervisor.endpoint;
  if (!endpoint) return;
  const headers = { authorization: `Bearer ${entry.token}` };
  const res = await agentFetch(endpoint, { path: "/drives/mount", headers, timeoutMs });
  if (res.status !== 200) throw new Error(`GET /drives/mount answered ${res.status}`);
  const { mounts } = JSON.parse(res.text) as { mounts: { mountPath: string }[] };
  for (const m of mounts) {
    await agentFetch(endpoint, {
      method: "DELETE",
      path: `/drives/mount/${encodeURIComponent(m.mountPath.replace(/^\/+/, ""))}?force=true`,
      headers,
      timeoutMs: 10_000,
    });
  }
}
