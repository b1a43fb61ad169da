import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { AgentSupervisor } from "../launcher/index.js";
import type { ImageService } from "../images/recipes.js";
import { startImageServices } from "../images/sandbox-images.js";

import { mountsUnder } from "../../src/mounts.js";
import { volumeMounts, type VolumeAttachment } from "./volumes.js";
import { key } from "./registry-state.js";
import { SandboxAgentsLifecycle } from "./registry-lifecycle.js";

/** The options (registry-state.ts), importable from here as before. */
export type { SandboxAgentsOptions } from "./registry-state.js";

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

/**
 * The simulator's running sandboxes: one supervised agent per sandbox, with
 * its files under the simulator's data dir:
 *   <dir>/sandboxes/<workspace>/<sandbox>/root   the sandbox's filesystem
 *   <dir>/sandboxes/<workspace>/<sandbox>/agent  the agent's state
 *   <dir>/drives/<workspace>/<drive>             drives, shared by the workspace's sandboxes
 *   <dir>/volumes/<workspace>/<volume>           volumes, mounted at their spec.volumes mountPath (volumes.ts)
 *   <dir>/retired/<workspace>/<sandbox>@<due>     a deleted sandbox's files, until the retention period ends
 *   <dir>/snapshots/<workspace>/<snapshot id>     a snapshot's copy of a sandbox's root (snapshot-files.ts)
 *
 * Its state is registry-state.ts, the end of its agents registry-lifecycle.ts; here, their start.
 */
export class SandboxAgents extends SandboxAgentsLifecycle {
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
        await this.options.prepareVolumes(
          workspace,
          sandbox,
          opts.volumes.map((v) => v.name!),
        );
      }
      if (opts.copyFilesOf) await this.copyRoot(workspace, opts.copyFilesOf, sandbox);
      if (opts.fromSnapshot) await this.snapshots.restoreInto(workspace, opts.fromSnapshot, join(dir, "root"));
      image.services = await this.options.images.prepareLaunch(supervisor.spec, opts.image);
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

  /** Copies one sandbox's files into another's root, leaving out what is mounted there (drives stay shared, not copied). */
  protected async copyRoot(workspace: string, from: string, to: string): Promise<void> {
    const source = join(this.sandboxDir(workspace, from), "root");
    if (!existsSync(source)) return;
    const mounted = new Set(mountsUnder(source));
    // Through the launcher where it copies sandboxes' files its own way (docker, swarm: their containers' layers).
    const target = join(this.sandboxDir(workspace, to), "root");
    if (this.options.launcher.copyTree && mounted.size === 0 && !existsSync(target)) return this.options.launcher.copyTree(source, target);
    cpSync(source, join(this.sandboxDir(workspace, to), "root"), { recursive: true, verbatimSymlinks: true, filter: (path) => !mounted.has(path) });
  }
}
