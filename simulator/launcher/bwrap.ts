import { spawn, spawnSync, type StdioOptions } from "node:child_process";
import { mkdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { agentEnvWithoutToken, agentMainPath } from "./agent-main.js";
import { adoptChild, reapOrphan } from "./child.js";
import { adoption } from "./bwrap-adoption.js";
import {
  bwrapArgv,
  agentCaEnv,
  caEnv,
  overlay as overlayOf,
  type SandboxTenant,
  SANDBOX_PATH,
  STAGE0,
  STAGE1,
  trustEgress,
  writeSandboxEtc,
} from "./bwrap-layout.js";
import { BwrapWarmPool, killWarmSandbox, type SpawnedSandbox } from "./bwrap-warm.js";
import type { AgentHost } from "../agent-host/host.js";
import { nsexecPath } from "../../sandbox-agent/process/ns-spawn.js";
import { startHosted } from "./bwrap-hosted.js";
import { activateWarm } from "./bwrap-activate.js";
import { cgroupSupport, type CgroupSupport, type MemoryCgroup } from "./cgroup.js";
import { copyMappedTree, describeIdMapping, removeMappedTree, resolveIdMapping, unshareIdArgs, type IdMapping } from "./id-map.js";
import { probeIsolation, which, type IsolationTools } from "./isolation.js";
import { DirectOutbound } from "./network.js";
import { sandboxKit, type SandboxKit } from "./sandbox-kit.js";
import { addHostCertificates, imageLayers, keepHostsCurrent, readInfo, unlockWorkDir } from "./sandbox-setup.js";
import { LaunchError, type AgentHandle, type LaunchSpec, type Launcher, type LauncherDescription, type WarmPoolState } from "./types.js";

/** Paths inside every sandbox (bwrap-layout.ts), importable from here as before. */
export { AGENT_DATA, AGENT_SOCKET, DRIVES, IN_SANDBOX_API_PORT, MEMORY_EVENTS } from "./bwrap-layout.js";

export function bwrapPath(): string | undefined {
  return which("bwrap");
}

export interface BwrapLauncherOptions {
  agentMain?: string;
  readyTimeoutMs?: number;
  /** Outbound network (slirp4netns) unless a spec says otherwise; "none" = loopback only. Default "outbound". */
  network?: "outbound" | "none";
  /**
   * Sandboxes started ahead of need, per workspace and image, their agent's
   * modules loaded (default 0; the simulator uses 1): a new sandbox takes one
   * over (bwrap-warm.ts) instead of waiting for namespaces and Node to start.
   */
  warm?: number;
  /**
   * "auto" (default): every user id in each sandbox where subordinate ids
   * can be had (id-map.ts); "single": uid 0 only (the mapping's cost, measured).
   */
  ids?: "auto" | "single";
  /**
   * The agent host serving every sandbox's agent API (simulator/agent-host): sandboxes then run no agent of
   * their own (no Node process per sandbox) and no warm pool. Undefined: each sandbox runs its own agent.
   */
  agentHost?: AgentHost;
  /** What /health says of who serves the agents (resolveAgentMode): the mode, and why not the host. */
  agentMode?: { mode: "host" | "process"; reason?: string };
}

/**
 * The isolating launcher (the default): each sandbox gets its own user,
 * mount, PID, IPC, UTS and network namespaces (util-linux's unshare for the
 * user and mount namespaces, Debian's bubblewrap for the rest), a root that
 * is an overlay of its image under its own writable layer, no capability
 * left to the commands it runs, outbound network through slirp4netns, a
 * memory cgroup where the host allows one, and its agent on a Unix socket
 * in its data dir (no host port). docs/launchers.md.
 */
export class BwrapLauncher implements Launcher {
  readonly name = "bwrap";
  /** Each sandbox's `/` is an overlay over its image's root filesystem (LaunchSpec.imageRootDir) when one is given. */
  readonly usesImageRoot = true;
  /** The simulator's egress gateway and proxy reach each sandbox (LaunchSpec.egress; simulator/egress). */
  readonly egress = true;
  /** Idle sandboxes stop in place (SIGSTOP to their PID namespace's processes, from outside): docs/launchers.md. */
  readonly standby = true as const;
  readonly tools: IsolationTools;
  readonly memory: CgroupSupport;
  private kit?: SandboxKit;
  private ids?: IdMapping;
  private readonly pool: BwrapWarmPool;

  constructor(private readonly options: BwrapLauncherOptions = {}) {
    const probe = probeIsolation();
    if (!probe.tools) throw new LaunchError(probe.unavailable!);
    this.tools = probe.tools;
    if ((options.network ?? "outbound") === "outbound" && !this.tools.slirp4netns) {
      throw new LaunchError("outbound network for sandboxes needs slirp4netns: apt-get install -y slirp4netns, or pass --sandbox-network none");
    }
    this.memory = cgroupSupport();
    // A hosted sandbox's start is its namespaces' (no Node to load ahead of need): nothing to keep warm.
    this.pool = new BwrapWarmPool(options.agentHost ? 0 : (options.warm ?? 0), (spec) => this.spawnSandbox(spec, "warm"));
  }

  describe(): LauncherDescription {
    const ids = this.mapIds();
    const agents = this.options.agentMode ?? (this.options.agentHost ? { mode: "host" as const } : { mode: "process" as const });
    return {
      launcher: this.name,
      isolated: true,
      detail: this.isolationDetail(),
      userIds: { all: ids.kind === "range", detail: describeIdMapping(ids) },
      agents,
    };
  }

  /** One line for logs and /health: what a sandbox gets here. */
  isolationDetail(): string {
    const net = (this.options.network ?? "outbound") === "outbound" ? "outbound network through slirp4netns" : "no outbound network";
    const mem = this.memory.unavailable ? `no memory limit (${this.memory.unavailable})` : `memory limits (cgroup v${this.memory.version})`;
    return `user, mount, PID, IPC, UTS and network namespaces; ${describeIdMapping(this.mapIds())}; commands get a container's default capabilities of the sandbox's own user namespace (no CAP_SYS_ADMIN); ${net}; ${mem}`;
  }

  /**
   * The user ids sandboxes get, resolved once: `owner` (the simulator's
   * sandboxes directory) keeps root's block of subordinate ids the same
   * across restarts, so files its sandboxes wrote keep their owners.
   * Checked by creating one such namespace; a failure leaves a single id.
   */
  mapIds(owner?: string): IdMapping {
    if (this.ids) return this.ids;
    if ((this.options.ids ?? "auto") === "single") return (this.ids = { kind: "single", reason: 'the launcher was asked for one id (ids: "single")' });
    const mapping = resolveIdMapping({ owner, helpers: { newuidmap: which("newuidmap"), newgidmap: which("newgidmap") } });
    if (mapping.kind === "range") {
      const check = spawnSync(this.tools.unshare, [...unshareIdArgs(mapping), "true"], {
        stdio: ["ignore", "ignore", "pipe"],
        timeout: 10_000,
        encoding: "utf8",
      });
      if (check.status !== 0)
        return (this.ids = {
          kind: "single",
          reason: `newuidmap refused the mapping: ${(check.stderr || check.error?.message || "").trim().split("\n").pop()}`,
        });
    }
    return (this.ids = mapping);
  }

  async start(spec: LaunchSpec): Promise<AgentHandle> {
    const kit = this.sandboxKit();
    if (this.options.agentHost) {
      for (const dir of [spec.rootDir, spec.dataDir]) mkdirSync(dir, { recursive: true });
      await reapOrphan(spec.dataDir);
      const start = { host: this.options.agentHost, kit, nsexec: nsexecPath()!, readyTimeoutMs: this.options.readyTimeoutMs };
      return startHosted(start, spec, this.spawnSandbox(spec, "hosted"));
    }
    const warm = await this.pool.take(spec);
    try {
      if (warm) {
        const activation = { kit, readyTimeoutMs: this.options.readyTimeoutMs, limitFailed: (why: string) => (this.memory.unavailable = why) };
        return await activateWarm(warm, spec, activation).catch(async (err: unknown) => {
          // Taken out of the pool but never adopted (a rename, the hostname, the network failed): nothing else
          // owns it now, so it ends here, its whole process tree, rather than outliving the simulator.
          await killWarmSandbox(warm.sandbox);
          throw err;
        });
      }
      for (const dir of [spec.rootDir, spec.dataDir]) mkdirSync(dir, { recursive: true });
      await reapOrphan(spec.dataDir);
      const sandbox = this.spawnSandbox(spec, "agent");
      return await adoptChild(sandbox.child, adoption(sandbox, spec, kit, this.options.readyTimeoutMs));
    } finally {
      this.pool.refill(spec); // after, not during: on a small machine the next warm-up would slow this start
    }
  }

  /** Where no range of subordinate ids could be had, the sandbox's user namespace maps root alone. */
  singleUserId(): string | undefined {
    const ids = this.mapIds();
    return ids.kind === "single" ? `the sandbox has one user id only (${ids.reason})` : undefined;
  }

  removeTree(path: string): void {
    removeMappedTree(path, this.mapIds(), this.tools.unshare);
  }

  copyTree(source: string, target: string): Promise<void> {
    return copyMappedTree(source, target, this.mapIds(), this.tools.unshare);
  }

  /** Starts the warm sandbox for specs like this one ahead of the first create. */
  prepare(spec: LaunchSpec): void {
    this.pool.refill(spec);
  }

  warmPool(): WarmPoolState {
    return this.pool.state();
  }

  /** Resolves once every idle warm sandbox is ready. */
  warmed(): Promise<void> {
    return this.pool.warmed();
  }

  /** Stops the idle warm sandboxes (running ones belong to their sandboxes) and the agent host's shared parts. */
  async close(): Promise<void> {
    await this.pool.close();
    await this.options.agentHost?.close();
  }

  private sandboxKit(): SandboxKit {
    this.kit ??= sandboxKit(this.options.agentMain ?? agentMainPath(), this.tools, this.options.agentHost ? nsexecPath() : undefined);
    return this.kit;
  }

  /**
   * Spawns the chain (cgroup, unshare + overlay, bwrap) with its tenant inside: the agent, the warm agent waiting
   * on IPC for its sandbox (warm-agent.ts), or for the agent host only the kit's idle process (bwrap-hosted.ts).
   */
  spawnSandbox(spec: LaunchSpec, tenant: SandboxTenant): SpawnedSandbox {
    const warm = tenant === "warm";
    const kit = this.sandboxKit();
    const outbound = spec.outboundNetwork ?? (this.options.network ?? "outbound") === "outbound";
    const etc = writeSandboxEtc(spec);
    const overlay = spec.imageRootDir ? overlayOf(spec) : undefined;
    if (overlay) addHostCertificates(imageLayers(spec), spec.rootDir);
    if (spec.egress) trustEgress(spec, spec.egress, overlay !== undefined);
    const cgroup = (warm || spec.memoryMb) && !this.memory.unavailable ? this.memoryCgroup(spec.memoryMb) : undefined;
    const bwrapArgs = bwrapArgv(spec, etc, kit, cgroup, tenant);
    const stage1 = [
      this.tools.unshare,
      ...unshareIdArgs(this.mapIds()),
      "--mount",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      STAGE1,
      "sandbox-stage1",
      overlay?.options ?? "",
      overlay?.mountAt ?? "",
      this.tools.bwrap,
      ...bwrapArgs,
    ];
    const argv = cgroup ? ["/bin/sh", "-c", STAGE0, cgroup.dir, ...stage1] : stage1;
    // fd 3: bwrap's --info-fd; fd 4: the agent's IPC channel (warm activation, then --port-handoff).
    const stdio: StdioOptions = tenant === "hosted" ? ["ignore", "pipe", "pipe", "pipe"] : ["ignore", "pipe", "pipe", "pipe", "ipc"];
    // The token is never in the environment of the chain (its environ is readable from inside the sandbox):
    // a cold agent reads it from a 0600 file in its data dir and deletes it; a warm one gets it over IPC.
    const child = spawn(argv[0]!, argv.slice(1), {
      env:
        tenant === "hosted"
          ? { PATH: SANDBOX_PATH }
          : warm
            ? { ...agentCaEnv(spec), PATH: SANDBOX_PATH }
            : { ...caEnv(spec), ...agentEnvWithoutToken(spec, "/root"), PATH: spec.env?.PATH ?? SANDBOX_PATH },
      stdio,
    });
    child.on("error", () => {});
    if (!warm) keepHostsCurrent(etc.hosts, spec, child);

    let sandboxPid: number | undefined;
    const info = readInfo(child.stdio[3] as Readable);
    void info.then(
      (pid) => (sandboxPid = pid),
      () => {},
    );
    // slirp4netns attaches once bwrap has finished setting the namespace up (it configures loopback over netlink too);
    // a sandbox whose policy restricts destinations has none: its egress proxy is its only way out (simulator/egress).
    const direct = new DirectOutbound(
      outbound ? this.tools.slirp4netns : undefined,
      info,
      spec.egress?.direct ?? true,
      () => child.exitCode === null && child.signalCode === null,
    );
    const network = () => direct.attach();
    const setDirect = (on: boolean) => direct.set(on);
    child.once("exit", () => {
      direct.stop();
      void cgroup?.remove();
      if (overlay) unlockWorkDir(overlay.workDir);
    });
    return { child, cgroup, network, setDirect, sandboxPid: () => sandboxPid, reportedPid: info };
  }

  /** A memory cgroup, or none when the host refuses one after all (the sandbox then runs without a limit, rather than not at all). */
  private memoryCgroup(limitMb: number | undefined): MemoryCgroup | undefined {
    try {
      return this.memory.create(`sbx-${randomBytes(6).toString("hex")}`, limitMb);
    } catch (err) {
      this.memory.unavailable = `creating a memory cgroup failed: ${(err as Error).message}`;
      return undefined;
    }
  }
}
