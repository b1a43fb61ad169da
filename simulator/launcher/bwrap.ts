import { spawn, spawnSync, type StdioOptions } from "node:child_process";
import { existsSync, mkdirSync, realpathSync, renameSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { agentArgs, agentEnv, agentEnvWithoutToken, agentMainPath } from "./agent-main.js";
import { TOKEN_HANDOFF } from "./docker-args.js";
import { adoptChild, reapOrphan } from "./child.js";
import { BwrapWarmPool, killWarmSandbox, type SpawnedSandbox, type WarmSandbox } from "./bwrap-warm.js";
import type { WarmActivation } from "./warm-agent.js";
import { cgroupSupport, type CgroupSupport, type MemoryCgroup } from "./cgroup.js";
import { SOCKET_URL } from "./endpoint.js";
import { copyMappedTree, describeIdMapping, removeMappedTree, resolveIdMapping, unshareIdArgs, type IdMapping } from "./id-map.js";
import { probeIsolation, which, type IsolationTools } from "./isolation.js";
import { DirectOutbound, SANDBOX_RESOLV_CONF } from "./network.js";
import { cmdlineOf, continueTree, descendantsOf, signal, stopTree } from "./proc.js";
import { sandboxKit, type SandboxKit } from "./sandbox-kit.js";
import { wrapperAs } from "./process-user.js";
import { portHandoff } from "./port-handoff.js";
import { openGateways, type SandboxEgressSpec } from "./gateway.js";
import { readBundle, trustInImage, writeTrustFiles } from "./egress-trust.js";
import {
  addHostCertificates,
  hostExtraCertificates,
  hostsFile,
  imageFile,
  imageLayers,
  keepHostsCurrent,
  readInfo,
  SANDBOX_CA_BUNDLE,
  setHostname,
  unlockWorkDir,
} from "./sandbox-setup.js";
import { LaunchError, type AgentHandle, type LaunchSpec, type Launcher, type LauncherDescription, type WarmPoolState } from "./types.js";

/** Inside the sandbox: the agent's state (and its socket), the workspace's drives, the memory cgroup's OOM counter. */
export const AGENT_DATA = "/run/sandbox-agent";
export const AGENT_SOCKET = `${AGENT_DATA}/agent.sock`;
export const DRIVES = "/run/sandbox-drives";
export const MEMORY_EVENTS = "/run/sandbox-memory/events";
/** The platform's daemon listens on 8080 inside every sandbox (its port is reserved for it). */
export const IN_SANDBOX_API_PORT = 8080;
/** --image-source host: the host's system directories, read-only, under the sandbox's own writable root. */
const HOST_SYSTEM = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];
const HOST_ETC = ["/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/ssl", "/etc/ca-certificates", "/etc/alternatives"];
const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Stage 1, inside the sandbox's user and mount namespace (unshare): mount the
 * image's overlay (lower: the image, read-only and shared; upper: the
 * sandbox's own directory) over the image's path — visible in this namespace
 * only, gone with it — then become bwrap.
 */
const STAGE1 = 'set -e; if [ -n "$1" ]; then mount -t overlay overlay -o "$1" "$2"; fi; shift 2; exec "$@"';
/** Stage 0 (memory limit): the first process joins the sandbox's cgroup before anything else starts. */
const STAGE0 = 'echo $$ > "$0/cgroup.procs" && exec "$@"';

function sandboxPidOf(sandbox: SpawnedSandbox): number {
  const pid = sandbox.sandboxPid();
  if (pid === undefined) throw new LaunchError("the sandbox's PID namespace is not known yet");
  return pid;
}

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
/** Node reads only its own CA list: pointed at the sandbox's bundle when the host added certificates to it. */
function caEnv(): Record<string, string> {
  return hostExtraCertificates() ? { NODE_EXTRA_CA_CERTS: SANDBOX_CA_BUNDLE } : {};
}

/**
 * The extra CAs the agent's own Node trusts: the spec's (the egress proxy's CA, simulator/egress), else the
 * host's (caEnv). Node reads NODE_EXTRA_CA_CERTS once, at start-up, so a warm agent is started with it: setting
 * it at activation reaches the commands it runs, never the agent itself.
 */
function agentCaEnv(spec: LaunchSpec): Record<string, string> {
  const own = spec.env?.NODE_EXTRA_CA_CERTS;
  return own !== undefined ? { NODE_EXTRA_CA_CERTS: own } : caEnv();
}

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
    this.pool = new BwrapWarmPool(options.warm ?? 0, (spec) => this.spawnSandbox(spec, true));
  }

  describe(): LauncherDescription {
    const ids = this.mapIds();
    return { launcher: this.name, isolated: true, detail: this.isolationDetail(), userIds: { all: ids.kind === "range", detail: describeIdMapping(ids) } };
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
    const warm = await this.pool.take(spec);
    try {
      if (warm) {
        return await this.activate(warm, spec).catch(async (err: unknown) => {
          // Taken out of the pool but never adopted (a rename, the hostname, the network failed): nothing else
          // owns it now, so it ends here, its whole process tree, rather than outliving the simulator.
          await killWarmSandbox(warm.sandbox);
          throw err;
        });
      }
      for (const dir of [spec.rootDir, spec.dataDir]) mkdirSync(dir, { recursive: true });
      await reapOrphan(spec.dataDir);
      const sandbox = this.spawnSandbox(spec, false);
      return await adoptChild(sandbox.child, this.adoption(sandbox, spec, kit));
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

  /** Stops the idle warm sandboxes (running ones belong to their sandboxes). */
  close(): Promise<void> {
    return this.pool.close();
  }

  private sandboxKit(): SandboxKit {
    this.kit ??= sandboxKit(this.options.agentMain ?? agentMainPath(), this.tools);
    return this.kit;
  }

  private adoption(sandbox: SpawnedSandbox, spec: LaunchSpec, kit: SandboxKit) {
    let stopped: number[] = [];
    return {
      command: "bwrap",
      dataDir: spec.dataDir,
      readyTimeoutMs: this.options.readyTimeoutMs,
      // SIGTERM must reach the agent so it closes its database; bwrap does not forward signals.
      termTargets: (pid: number) => descendantsOf(pid).filter((p) => cmdlineOf(p).includes(kit.agentMain) || cmdlineOf(p).includes(kit.warmMain)),
      endpointOf: () => ({ url: SOCKET_URL, socketPath: join(spec.dataDir, "agent.sock") }),
      // The network, then the egress gateway: the simulator's address inside the sandbox (gateway.ts).
      alsoReady: () => Promise.all([sandbox.network(), spec.egress && openGateways(sandbox.child, spec.egress)]).then(() => undefined),
      sandboxPid: sandbox.sandboxPid,
      // The host cannot reach the sandbox's loopback: its agent connects there and hands the socket over.
      openPort: portHandoff(sandbox.child),
      setDirectOutbound: sandbox.setDirect,
      // Standby: every process of the sandbox's PID namespace (its init, the agent, what it runs) is stopped
      // from outside; slirp4netns, the egress gateways and the simulator are not in it and keep running.
      freeze: async () => void (stopped = await stopTree(sandboxPidOf(sandbox))),
      // A stopped process forks nothing: the processes stopped are all there is to continue (no /proc scan on
      // the resume path, which a request waits for).
      thaw: async () => {
        if (stopped.length === 0) return continueTree(sandboxPidOf(sandbox));
        for (const pid of stopped) signal(pid, "SIGCONT");
        stopped = [];
      },
    };
  }

  /** A warm sandbox becomes this one: its directories take the spec's paths, its agent gets the spec's argv and env. */
  private async activate(warm: WarmSandbox, spec: LaunchSpec): Promise<AgentHandle> {
    // The sandbox's binds follow the directories' inodes: renamed, they stay mounted where they were.
    for (const [from, to] of [
      [warm.rootDir, spec.rootDir],
      [warm.dataDir, spec.dataDir],
    ] as const) {
      mkdirSync(dirname(to), { recursive: true });
      renameSync(from, to);
    }
    try {
      if (spec.memoryMb) warm.sandbox.cgroup?.limit(spec.memoryMb);
    } catch (err) {
      this.memory.unavailable = `setting a memory limit failed: ${(err as Error).message}`;
    }
    writeFileSync(join(spec.dataDir, "etc", "hosts"), hostsFile(spec.sandbox, spec.egress?.hosts));
    keepHostsCurrent(join(spec.dataDir, "etc", "hosts"), spec, warm.sandbox.child);
    if (spec.egress) this.trustEgress(spec, spec.egress, false);
    if (spec.egress?.direct === false) await warm.sandbox.setDirect(false);
    await setHostname(warm.sandbox.sandboxPid()!, spec.sandbox.slice(0, 63));
    const kit = this.sandboxKit();
    const activation: WarmActivation = { argv: this.agentArgv(spec, warm.sandbox.cgroup !== undefined), env: this.sandboxEnv(spec) as Record<string, string> };
    return adoptChild(warm.sandbox.child, this.adoption(warm.sandbox, spec, kit), () => warm.sandbox.child.send(activation));
  }

  private agentArgv(spec: LaunchSpec, memoryEvents: boolean): string[] {
    return [
      ...agentArgs({ root: "/", dataDir: AGENT_DATA, sandbox: spec.sandbox, logLevel: spec.logLevel, drivesDir: spec.drivesDir ? DRIVES : undefined }),
      "--socket",
      AGENT_SOCKET,
      // The sandbox's own processes (a template's entrypoint: curl localhost:8080/process) reach it as on the platform.
      "--in-sandbox-port",
      String(IN_SANDBOX_API_PORT),
      "--port-handoff",
      "--process-wrapper",
      JSON.stringify(wrapperAs(this.sandboxKit().processWrapper, spec.user)),
      ...(spec.workingDir ? ["--working-dir", spec.workingDir] : []),
      "--mount-program",
      JSON.stringify(this.sandboxKit().mountProgram),
      "--umount-program",
      JSON.stringify(this.sandboxKit().umountProgram),
      ...(memoryEvents ? ["--memory-events", MEMORY_EVENTS] : []),
    ];
  }

  /** The one-time token file a cold agent reads and removes (--token-file-remove), as the docker launcher does. */
  private tokenHandoff(spec: LaunchSpec): string[] {
    mkdirSync(spec.dataDir, { recursive: true });
    writeFileSync(join(spec.dataDir, TOKEN_HANDOFF), `${spec.token}\n`, { mode: 0o600 });
    return ["--token-file", `${AGENT_DATA}/${TOKEN_HANDOFF}`, "--token-file-remove"];
  }

  private sandboxEnv(spec: LaunchSpec): NodeJS.ProcessEnv {
    return { ...caEnv(), ...agentEnv(spec, "/root"), PATH: spec.env?.PATH ?? SANDBOX_PATH };
  }

  /**
   * Spawns the chain (cgroup, unshare + overlay, bwrap) with the agent inside,
   * or, `warm`, the warm agent waiting on IPC for its sandbox (warm-agent.ts).
   */
  spawnSandbox(spec: LaunchSpec, warm: boolean): SpawnedSandbox {
    const kit = this.sandboxKit();
    const outbound = spec.outboundNetwork ?? (this.options.network ?? "outbound") === "outbound";
    const etc = this.writeSandboxEtc(spec);
    const overlay = spec.imageRootDir ? this.overlay(spec) : undefined;
    if (overlay) addHostCertificates(imageLayers(spec), spec.rootDir);
    if (spec.egress) this.trustEgress(spec, spec.egress, overlay !== undefined);
    const cgroup = (warm || spec.memoryMb) && !this.memory.unavailable ? this.memoryCgroup(spec.memoryMb) : undefined;
    const bwrapArgs = [
      "--die-with-parent",
      "--new-session",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--unshare-net",
      "--unshare-cgroup-try",
      "--hostname",
      spec.sandbox.slice(0, 63),
      "--info-fd",
      "3",
      ...this.rootBinds(spec),
      "--ro-bind",
      etc.resolv,
      "/etc/resolv.conf",
      "--ro-bind",
      etc.hosts,
      "/etc/hosts",
      ...kit.binds,
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      "--bind",
      spec.dataDir,
      AGENT_DATA,
      ...(spec.drivesDir ? (mkdirSync(spec.drivesDir, { recursive: true }), ["--bind", spec.drivesDir, DRIVES]) : []),
      ...(cgroup ? ["--ro-bind", cgroup.eventsFile, MEMORY_EVENTS] : []),
      ...(spec.mounts ?? []).flatMap((m) => {
        if (!existsSync(m.source)) throw new LaunchError(`mount source ${m.source} (for ${m.target}) does not exist`);
        return [m.readOnly ? "--ro-bind" : "--bind", m.source, m.target];
      }),
      "--chdir",
      "/",
      "--",
      ...kit.loader,
      ...(warm ? [kit.warmMain] : [kit.agentMain, ...this.agentArgv(spec, cgroup !== undefined), ...this.tokenHandoff(spec)]),
    ];
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
    const stdio: StdioOptions = ["ignore", "pipe", "pipe", "pipe", "ipc"];
    // The token is never in the environment of the chain (its environ is readable from inside the sandbox):
    // a cold agent reads it from a 0600 file in its data dir and deletes it; a warm one gets it over IPC.
    const child = spawn(argv[0]!, argv.slice(1), {
      env: warm ? { ...agentCaEnv(spec), PATH: SANDBOX_PATH } : { ...caEnv(), ...agentEnvWithoutToken(spec, "/root"), PATH: spec.env?.PATH ?? SANDBOX_PATH },
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
    return { child, cgroup, network, setDirect, sandboxPid: () => sandboxPid };
  }

  /** The egress proxy's CA in the sandbox's store (its own layer, before the overlay is mounted) and in its data dir's trust files (egress-trust.ts). */
  private trustEgress(spec: LaunchSpec, egress: SandboxEgressSpec, beforeOverlay: boolean): void {
    if (beforeOverlay) trustInImage(imageLayers(spec), spec.rootDir, egress.caPem);
    const own = join(spec.rootDir, SANDBOX_CA_BUNDLE);
    const system = spec.imageRootDir ? (readBundle(own) ? own : (imageFile(imageLayers(spec), SANDBOX_CA_BUNDLE) ?? "")) : SANDBOX_CA_BUNDLE;
    writeTrustFiles(spec.dataDir, egress.caPem, system);
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

  /** `/` of the sandbox: the overlay (mounted over the image's path in stage 1), or its own directory with the host's system read-only. */
  private rootBinds(spec: LaunchSpec): string[] {
    if (spec.imageRootDir) return ["--bind", realpathSync(spec.imageRootDir), "/"];
    for (const dir of ["tmp", "root"]) mkdirSync(join(spec.rootDir, dir), { recursive: true });
    const ro = (path: string) => (existsSync(path) ? ["--ro-bind", path, path] : []);
    return ["--bind", spec.rootDir, "/", ...HOST_SYSTEM.flatMap(ro), ...HOST_ETC.flatMap(ro)];
  }

  /** The sandbox's own layer over the image's layers (a template's over its base's: overlayfs stacks several lower layers, top first). */
  private overlay(spec: LaunchSpec): { options: string; mountAt: string; workDir: string } {
    const lowers = imageLayers(spec).map((dir) => realpathSync(dir));
    const upper = realpathSync(spec.rootDir);
    const workDir = `${upper}.overlay-work`;
    mkdirSync(workDir, { recursive: true });
    for (const path of [...lowers, upper, workDir]) {
      // overlayfs splits its options on "," and ":" (and treats "\" as an escape).
      if (/[,:\\]/.test(path)) throw new LaunchError(`the overlay cannot use ${path}: paths with ",", ":" or "\\" are not supported`);
    }
    return { options: `lowerdir=${lowers.join(":")},upperdir=${upper},workdir=${workDir},userxattr`, mountAt: lowers[0]!, workDir };
  }

  /** The sandbox's resolver (slirp4netns's DNS forwarder) and hosts file, in its data dir. */
  private writeSandboxEtc(spec: LaunchSpec): { resolv: string; hosts: string } {
    const dir = join(spec.dataDir, "etc");
    mkdirSync(dir, { recursive: true });
    const resolv = join(dir, "resolv.conf");
    const hosts = join(dir, "hosts");
    writeFileSync(resolv, SANDBOX_RESOLV_CONF);
    writeFileSync(hosts, hostsFile(spec.sandbox, spec.egress?.hosts));
    return { resolv, hosts };
  }
}
