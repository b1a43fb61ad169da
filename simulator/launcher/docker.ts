import { randomBytes } from "node:crypto";
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { constants } from "node:os";
import { agentMainPath } from "./agent-main.js";
import { dockerPath, runDocker, type Ran } from "./docker-cli.js";
import { hostsFile } from "./sandbox-setup.js";
import { DEFAULT_STOP_GRACE_MS, waitHealthy } from "./child.js";
import {
  AGENT_PORT,
  DATA_DIR_LABEL,
  dockerCliEnv,
  dockerRunArgs,
  FALLBACK_IMAGE,
  TOKEN_HANDOFF,
  writeEnvHandoff,
  type DockerRunInputs,
} from "./docker-args.js";
import { commitLayer, copyLayer, removeLayersAndTree, startImage } from "./docker-files.js";
import { ensureImage } from "./docker-images.js";
import {
  closeHostToNetwork,
  containerAddress,
  openHostToNetwork,
  createSandboxNetwork,
  openEgressListener,
  setOutbound,
  writeContainerTrust,
} from "./docker-network.js";
import { LaunchError, type AgentExit, type AgentHandle, type ImageSupply, type LaunchSpec, type Launcher, type LauncherDescription } from "./types.js";

export { dockerPath, runDocker, type Ran } from "./docker-cli.js";

/**
 * The agent inside a container of spec.runtime.image (`--launcher docker`),
 * driven through the docker CLI with argv only (never a shell). The layout is
 * docker-args.ts. Readiness: GET /health through the published loopback port.
 * Crashes: `docker wait` settles `exited` with the container's exit code
 * (128 + n read as signal n) and its last log lines. Stop: `docker stop -t`
 * (SIGTERM, then docker's own SIGKILL after the grace), `docker kill` if that
 * fails; once it has exited its layer (the sandbox's files) is committed
 * (docker-files.ts) and the container removed.
 */

export interface DockerLauncherOptions {
  /** The docker CLI (default: found on PATH). */
  docker?: string;
  agentMain?: string;
  /** The image for sandboxes whose spec names none. */
  image?: string;
  readyTimeoutMs?: number;
}

/** Why the docker launcher cannot run here (no CLI, no reachable daemon), or undefined when it can. */
export async function dockerUnavailable(docker = dockerPath()): Promise<string | undefined> {
  if (!docker) return "the docker CLI is not installed";
  const info = await runDocker(docker, ["info", "--format", "{{.ServerVersion}}"], process.env, 10_000);
  if (info.code === 0 && info.stdout.trim()) return undefined;
  return `no Docker daemon is reachable (docker info: ${(info.stderr.trim().split("\n").pop() ?? `exit ${info.code}`).slice(0, 200)})`;
}

/** Exit code 128 + n is the container's main process killed by signal n. */
export function exitOf(code: number | null, logs: string): AgentExit {
  if (code !== null && code > 128) {
    const name = Object.entries(constants.signals).find(([, n]) => n === code - 128)?.[0] as NodeJS.Signals | undefined;
    if (name) return { code: null, signal: name, stderr: logs };
  }
  return { code, signal: null, stderr: logs };
}

export class DockerLauncher implements Launcher {
  readonly name = "docker";
  /** Idle sandboxes are paused in place (docker pause: the cgroup freezer). */
  readonly standby = true as const;

  describe(): LauncherDescription {
    return { launcher: this.name, isolated: true, detail: "a container per sandbox (the Docker daemon's isolation)" };
  }
  /** Each container on a network of its own, its traffic through the simulator's egress (docker-network.ts). */
  readonly egress = true;
  private readonly docker: string;
  /** The running container of each sandbox root (a snapshot or fork of a running sandbox commits it). */
  private readonly live = new Map<string, { name: string; base: string }>();
  /** Where images the daemon lacks come from (the simulator's image store: Launcher.useImages). */
  private supply: ImageSupply | undefined;

  useImages(supply: ImageSupply): void {
    this.supply = supply;
  }

  constructor(private readonly options: DockerLauncherOptions = {}) {
    const found = options.docker ?? dockerPath();
    if (!found) throw new LaunchError("--launcher docker needs the docker CLI and a reachable Docker daemon");
    this.docker = found;
  }

  private run(args: string[], env?: NodeJS.ProcessEnv, timeoutMs?: number): Promise<Ran> {
    return runDocker(this.docker, args, env, timeoutMs);
  }

  /** A container a previous simulator run left for this data dir holds its database: remove it first. */
  private async reapOrphans(dataDir: string): Promise<void> {
    const found = await this.run(["ps", "--all", "--quiet", "--filter", `label=${DATA_DIR_LABEL}=${dataDir}`]);
    const ids = found.stdout
      .split("\n")
      .map((s) => s.trim())
      .filter(Boolean);
    if (ids.length > 0) await this.run(["rm", "--force", ...ids]);
    const networks = await this.run(["network", "ls", "--quiet", "--filter", `label=${DATA_DIR_LABEL}=${dataDir}`]);
    const netIds = networks.stdout
      .split("\n")
      .map((s) => s.trim())
      .filter(Boolean);
    if (netIds.length > 0) await this.run(["network", "rm", ...netIds]);
    for (const id of netIds) await openHostToNetwork(`br-${id.slice(0, 12)}`);
  }

  /** The sandbox's own network and egress listener (docker-network.ts); `release` undoes both once its container is gone. */
  private async egressNetwork(spec: LaunchSpec, name: string) {
    const egress = spec.egress!;
    const network = await createSandboxNetwork((args) => this.run(args), `${name}-net`, [`${DATA_DIR_LABEL}=${spec.dataDir}`]);
    const listener = await openEgressListener(network.gateway, egress).catch(async (err: Error) => {
      await this.run(["network", "rm", network.name]);
      throw new LaunchError(`cannot listen for sandbox "${spec.sandbox}"'s egress on ${network.gateway}: ${err.message}`);
    });
    const guard = await closeHostToNetwork(network, listener.port);
    const hostsPath = join(spec.dataDir, "etc", "hosts");
    mkdirSync(join(spec.dataDir, "etc"), { recursive: true });
    writeFileSync(hostsPath, hostsFile(spec.sandbox, egress.hosts));
    const stopHosts = egress.watchHosts?.((names) => writeFileSync(hostsPath, hostsFile(spec.sandbox, names)));
    const inputs: NonNullable<DockerRunInputs["network"]> = {
      name: network.name,
      relay: `${egress.listen[0]!.port}=${network.gateway}:${listener.port}`,
      caBundle: writeContainerTrust(spec.dataDir, egress.caPem),
      hostsFile: hostsPath,
    };
    let released: Promise<void> | undefined;
    const release = () =>
      (released ??= (async () => {
        stopHosts?.();
        listener.server.close();
        await guard?.undo();
        await this.run(["network", "rm", network.name]);
      })());
    return { network, listener, inputs, release };
  }

  async start(spec: LaunchSpec): Promise<AgentHandle> {
    for (const dir of [spec.rootDir, spec.dataDir, ...(spec.drivesDir ? [spec.drivesDir] : [])]) mkdirSync(dir, { recursive: true });
    await this.reapOrphans(spec.dataDir);
    const base = spec.image ?? this.options.image ?? FALLBACK_IMAGE;
    const { image, layer } = startImage(spec.rootDir, base);
    // The image reaches the daemon first (imported from the simulator's store when missing), unless the sandbox's files hold it.
    if (!layer)
      await ensureImage((a, t) => this.run(a, process.env, t), base, {
        supply: this.supply,
        workspace: spec.workspace,
        sandbox: spec.sandbox,
        node: "this host",
      });
    const name = `sbx-${`${spec.workspace}-${spec.sandbox}`.replace(/[^a-zA-Z0-9_.-]/g, "-").slice(0, 80)}-${randomBytes(4).toString("hex")}`;
    const user = `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`;
    const net = spec.egress ? await this.egressNetwork(spec, name) : undefined;
    const args = dockerRunArgs(spec, {
      name,
      agentMain: realpathSync(this.options.agentMain ?? agentMainPath()),
      node: realpathSync(process.execPath),
      user,
      image,
      network: net?.inputs,
    });
    // The token's hand-off: the agent (same uid) reads and deletes it before it serves anything.
    writeFileSync(join(spec.dataDir, TOKEN_HANDOFF), `${spec.token}\n`, { mode: 0o600 });
    writeEnvHandoff(spec);
    const deadline = Date.now() + (this.options.readyTimeoutMs ?? 120_000); // a first run may pull the image
    const ran = await this.run(args, dockerCliEnv(), Math.max(1_000, deadline - Date.now()));
    if (ran.code !== 0) {
      await this.run(["rm", "--force", name]);
      await net?.release();
      throw new LaunchError(`docker run for sandbox "${spec.sandbox}" failed (exit ${ran.code}): ${ran.stderr.trim().slice(-500)}`);
    }
    const files = { rootDir: spec.rootDir, base, keep: true };
    this.live.set(spec.rootDir, { name, base });
    const exited = this.watch(name, files, net?.release);
    let gone = false;
    void exited.then(() => (gone = true));
    try {
      let url: string;
      if (net) {
        const address = await containerAddress((a) => this.run(a), name, net.network.name);
        net.listener.allow(address);
        url = `http://${address}:${AGENT_PORT}`;
        if (spec.egress!.direct !== false && spec.outboundNetwork !== false) await setOutbound((a) => this.run(a), name, true);
      } else url = await this.publishedUrl(name);
      await waitHealthy({ url }, deadline, { gone: () => (gone ? "the agent's container exited before it was healthy" : undefined), pollMs: 50 });
      const handle = this.handle(name, url, exited);
      if (!net) return handle;
      return { ...handle, setDirectOutbound: (on: boolean) => setOutbound((a) => this.run(a), name, on && spec.outboundNetwork !== false) };
    } catch (err) {
      files.keep = false; // a start that failed leaves the sandbox's files as they were
      await this.run(["rm", "--force", name]);
      const exit = await exited;
      throw new LaunchError(`${(err as Error).message}${exit.stderr.trim() ? `: ${exit.stderr.trim().slice(-500)}` : ""}`);
    }
  }

  /**
   * `docker wait`: settles once the container has exited, with its last log lines; its layer is then committed as
   * the sandbox's files (unless `files.keep` was cleared), the container removed and its network `release`d.
   */
  private watch(name: string, files: { rootDir: string; base: string; keep: boolean }, release?: () => Promise<void>): Promise<AgentExit> {
    return (async () => {
      const waited = await this.run(["wait", name], process.env, 0);
      const code = /^\d+$/.test(waited.stdout.trim()) ? Number(waited.stdout.trim()) : null;
      const logs = await this.run(["logs", "--tail", "40", name]);
      let kept = "";
      let previous: string | undefined;
      if (files.keep) {
        previous = await commitLayer((a, t) => this.run(a, process.env, t), name, files.rootDir, files.base).then(
          (c) => c.previous,
          (err: Error) => void (kept = `\nthe sandbox's files could not be kept: ${err.message}`),
        );
      }
      if (this.live.get(files.rootDir)?.name === name) this.live.delete(files.rootDir);
      await this.run(["rm", "--force", name]);
      // The files' previous image, once no container uses it (its layers stay under the new one).
      if (previous) await this.run(["rmi", previous]);
      await release?.();
      return exitOf(code, `${(logs.stderr || waited.stderr).slice(-4096)}${kept}`);
    })();
  }

  /**
   * A copy of a sandbox's files (snapshot, fork, restore): a running sandbox's container is committed (docker
   * pauses it while its layer is read), a stopped one's layer image tagged again; the copy's marker names its own
   * image. A root with no layer (never started here) is copied as files.
   */
  async copyTree(source: string, target: string): Promise<void> {
    const run = (a: string[], t?: number) => this.run(a, process.env, t);
    const live = this.live.get(source);
    await copyLayer(run, source, target, live ? { container: live.name, base: live.base } : undefined);
  }

  /** rm -rf, after untagging the images of the sandbox's files its markers name (docker-files.ts). */
  removeTree(path: string): void {
    removeLayersAndTree(this.docker, path);
  }

  private async publishedUrl(name: string): Promise<string> {
    const port = await this.run(["port", name, `${AGENT_PORT}/tcp`]);
    const hostPort = port.stdout
      .split("\n")
      .map((l) => /^127\.0\.0\.1:(\d+)$/.exec(l.trim())?.[1])
      .find(Boolean);
    if (port.code !== 0 || !hostPort)
      throw new LaunchError(`container ${name} publishes no loopback port for ${AGENT_PORT}: ${port.stderr.trim() || port.stdout.trim()}`);
    return `http://127.0.0.1:${hostPort}`;
  }

  private handle(name: string, url: string, exited: Promise<AgentExit>): AgentHandle {
    let stopping: Promise<AgentExit> | undefined;
    let paused = false;
    return {
      url,
      exited,
      // The cgroup freezer, the kept way of docker to stop a container in place.
      freeze: async () => {
        paused = true;
        const ran = await this.run(["pause", name]);
        if (ran.code !== 0) throw new LaunchError(`docker pause ${name} failed: ${ran.stderr.trim()}`);
      },
      thaw: async () => {
        const ran = await this.run(["unpause", name]);
        if (ran.code !== 0 && !/is not paused/.test(ran.stderr)) throw new LaunchError(`docker unpause ${name} failed: ${ran.stderr.trim()}`);
        paused = false;
      },
      stop: (graceMs = DEFAULT_STOP_GRACE_MS) =>
        (stopping ??= (async () => {
          // A paused container's processes cannot take SIGTERM: it goes on first, then drains.
          if (paused) await this.run(["unpause", name]);
          // docker stop sends SIGTERM (the agent closes its database), then SIGKILL once the grace is over.
          const stopped = await this.run(["stop", "-t", String(Math.max(1, Math.ceil(graceMs / 1000))), name], process.env, graceMs + 30_000);
          if (stopped.code !== 0) await this.run(["kill", name]);
          return exited;
        })()),
    };
  }
}
