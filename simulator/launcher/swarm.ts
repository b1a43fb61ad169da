import { randomBytes } from "node:crypto";
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { agentMainPath } from "./agent-main.js";
import { DEFAULT_STOP_GRACE_MS, waitHealthy } from "./child.js";
import { AGENT_PORT, dockerCliEnv, TOKEN_HANDOFF, writeEnvHandoff } from "./docker-args.js";
import { dockerPath, runDocker, type Ran } from "./docker-cli.js";
import { removeLayersAndTree, startImage } from "./docker-files.js";
import { SwarmFiles } from "./swarm-files.js";
import { SwarmPrepare } from "./swarm-prepare.js";
import { nodeList, NodeEngines } from "./swarm-nodes.js";
import { liveServices, ownerLabel, trackService } from "./swarm-owner.js";
import { specImage, SWARM_LABELS, swarmName, swarmServiceArgs, workspaceNetwork } from "./swarm-args.js";
import { writeSwarmEgressFiles } from "./swarm-egress.js";
import { swarmTaskHandle } from "./swarm-handle.js";
import { SwarmServices, type SandboxFiles } from "./swarm-services.js";
import { inspectTasks, listNodes, TaskWatcher, TERMINAL_STATES, type NodeStatus, type TaskStatus } from "./swarm-tasks.js";
import {
  LaunchError,
  type AgentExit,
  type AgentHandle,
  type ImageSupply,
  type LaunchSpec,
  type LauncherNode,
  type Launcher,
  type LauncherDescription,
} from "./types.js";

/**
 * Sandboxes as Docker Swarm services (`--launcher swarm`), through a swarm manager's Docker API (the local
 * socket, or DOCKER_HOST for a remote one) with the docker CLI, argv only. Each start is one service of one
 * replica (swarm-args.ts); `start` resolves once the task runs and its agent answers /health at the node's
 * address and published port. `exited` settles when the task stops, is removed or its node leaves or goes down
 * (swarm-tasks.ts): the supervisor then restarts it (the swarm places the new service on a node that fits) or
 * marks the sandbox FAILED with the reason. `stop` scales the service to 0 (SIGTERM, SIGKILL after the grace)
 * and removes it once its task has stopped and its layer (the sandbox's files, docker-files.ts) was committed
 * by its node's engine (swarm-nodes.ts), pushed to the registry when there is one, else kept on that node,
 * where the sandbox's next task is then placed (the services themselves: swarm-services.ts). With the simulator's
 * egress, the sandbox's connections to the simulator's address reach it over tunnels to the agent, and its
 * direct outbound path is cut while its policy restricts destinations (swarm-egress.ts, swarm-handle.ts).
 */

export interface SwarmLauncherOptions {
  docker?: string;
  agentMain?: string;
  /** The image for sandboxes whose spec names none. */
  image?: string;
  readyTimeoutMs?: number;
  /** Placement constraints for every sandbox (`--swarm-constraint`, docker's `node.labels.x==y` syntax). */
  constraints?: string[];
  /** A registry every node pulls from (`--swarm-registry host:port`): sandbox images are pushed there first. */
  registry?: string;
  /** The docker CLI's environment: how it reaches the manager (DOCKER_HOST...); default the simulator's own. */
  env?: NodeJS.ProcessEnv;
  /** How often live tasks are polled (default 500 ms). */
  pollMs?: number;
  /** How often services of this simulator it no longer tracks are looked for and removed (default 30 s). */
  sweepMs?: number;
}

/** The owner label (swarm-owner.ts) and the registry's image name (swarm-args.ts), importable from here as before. */
export { ownerGone, ownerLabel } from "./swarm-owner.js";
export { registryRef } from "./swarm-args.js";

export class SwarmLauncher implements Launcher {
  readonly name = "swarm";
  /**
   * Standby pauses a task's container with its own node's engine (`docker pause` is per node, swarm-nodes.ts):
   * sandboxes on a node whose engine the simulator cannot reach (no sandbox-kit.engine label) never sleep.
   */
  readonly standby = true as const;
  /** The simulator's egress reaches each sandbox over tunnels to its agent (swarm-egress.ts). */
  readonly egress = true;
  private readonly docker: string;
  private readonly owner = ownerLabel();
  private readonly watcher: TaskWatcher;
  private readonly needs: SwarmPrepare;
  private readonly ready: Promise<string | undefined>;
  private readonly engines: NodeEngines;
  private readonly files: SwarmFiles;
  private readonly services: SwarmServices;
  private sweeper: NodeJS.Timeout | undefined;
  /** False while the manager does not answer the poll: its return triggers a sweep. */
  private managerAnswers = true;
  /** The running task of each sandbox root (a snapshot or fork of a running sandbox commits its container). */
  private readonly live = new Map<string, { taskId: string; base: string }>();
  private supply: ImageSupply | undefined;
  private readonly env: NodeJS.ProcessEnv;
  /** The swarm's nodes as last seen, and the node of each live task (/health: Launcher.nodes). */
  private swarmNodes = new Map<string, NodeStatus>();
  private readonly taskNodes = new Map<string, string>();

  constructor(private readonly options: SwarmLauncherOptions = {}) {
    const found = options.docker ?? dockerPath();
    if (!found) throw new LaunchError("--launcher swarm needs the docker CLI and a reachable swarm manager");
    this.docker = found;
    this.env = options.env ?? process.env;
    this.engines = new NodeEngines((args, env, timeoutMs) => this.run(args, env, timeoutMs), this.env);
    this.files = new SwarmFiles(this.engines, (args, timeoutMs) => this.run(args, this.env, timeoutMs), options.registry);
    this.needs = new SwarmPrepare((args, timeoutMs) => this.run(args, this.env, timeoutMs), this.engines, this.env, options.registry);
    this.watcher = new TaskWatcher(
      (args, timeoutMs) => this.run(args, this.env, timeoutMs),
      AGENT_PORT,
      options.pollMs ?? 500,
      (nodes) => {
        if (nodes && !this.managerAnswers) void this.sweep();
        this.managerAnswers = nodes !== undefined;
        if (nodes) this.swarmNodes = nodes;
      },
    );
    this.services = new SwarmServices((args, env, timeoutMs) => this.run(args, env, timeoutMs), this.files, this.watcher, this.live, this.owner);
    this.ready = this.init();
    this.ready.catch(() => {});
  }

  /** The swarm's nodes as the last poll saw them, with this simulator's sandboxes on each. */
  nodes(): LauncherNode[] {
    return nodeList(this.swarmNodes, this.taskNodes, this.engines.localId);
  }

  useImages(supply: ImageSupply): void {
    this.supply = supply;
  }

  /** What /health and the start-up line say: where images come from on the cluster. */
  describe(): LauncherDescription {
    const images = this.options.registry
      ? `images pushed to ${this.options.registry}, which every node pulls from`
      : "no --swarm-registry: images stay in the manager's local image store, so a node runs a sandbox only if it has the image itself (fine on one node)";
    const constraints = this.options.constraints?.length ? `; placement: ${this.options.constraints.join(", ")}` : "";
    return {
      launcher: this.name,
      isolated: true,
      detail: `a swarm service per sandbox (the Docker daemon's isolation on whichever node the swarm picks); ${images}${constraints}`,
    };
  }

  private run(args: string[], env: NodeJS.ProcessEnv = this.env, timeoutMs?: number): Promise<Ran> {
    return runDocker(this.docker, args, env, timeoutMs);
  }

  /** Undefined when the daemon is an active swarm manager, else why no sandbox can start; reaps a killed simulator's services. */
  private async init(): Promise<string | undefined> {
    const info = await this.run(["info", "--format", "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}"], this.env, 15_000);
    const [state, manager] = info.stdout.trim().split(" ");
    if (info.code !== 0) return `no Docker daemon is reachable (${info.stderr.trim().split("\n").pop()?.slice(0, 200)})`;
    if (state !== "active") return `the Docker daemon is not in a swarm (state ${state}): run docker swarm init, or point DOCKER_HOST at a manager`;
    if (manager !== "true") return "the Docker daemon is a swarm worker: point DOCKER_HOST at a manager";
    await this.engines.local();
    // A failed reap does not stop sandboxes from starting: each start still removes what holds its own data dir.
    await this.services.reapOrphans().catch(() => undefined);
    this.sweeper = setInterval(() => void this.sweep(), this.options.sweepMs ?? 30_000);
    this.sweeper.unref();
    return undefined;
  }

  /** Removes services of this simulator it no longer tracks (swarm-services.ts); resolves with their names. */
  sweep(): Promise<string[]> {
    return this.services.sweep().catch(() => []);
  }

  async start(spec: LaunchSpec): Promise<AgentHandle> {
    const unavailable = await this.ready;
    if (unavailable) throw new LaunchError(`--launcher swarm cannot start sandbox "${spec.sandbox}": ${unavailable}`);
    for (const dir of [spec.rootDir, spec.dataDir, ...(spec.drivesDir ? [spec.drivesDir] : [])]) mkdirSync(dir, { recursive: true });
    const deadline = Date.now() + (this.options.readyTimeoutMs ?? 120_000);
    // A service an earlier run left for this data dir holds its database: stop it first.
    await this.services.reap(`label=${SWARM_LABELS.dataDir}=${spec.dataDir}`);
    const base = specImage(spec, this.options.image);
    const { image: start, layer } = startImage(spec.rootDir, base);
    const [image] = await Promise.all([layer ? Promise.resolve(start) : this.needs.image(spec, base, this.supply), this.needs.network(spec.workspace)]);
    const name = swarmName("sbx", spec.workspace, spec.sandbox, randomBytes(4).toString("hex"));
    const graceMs = DEFAULT_STOP_GRACE_MS;
    const egressFiles = spec.egress ? writeSwarmEgressFiles(spec, spec.egress) : undefined;
    const args = swarmServiceArgs(spec, {
      name,
      image,
      base,
      egress: egressFiles,
      network: workspaceNetwork(spec.workspace),
      owner: this.owner,
      constraints: this.options.constraints ?? [],
      resolveImage: this.options.registry !== undefined,
      stopGraceSeconds: Math.ceil(graceMs / 1000),
      agentMain: realpathSync(this.options.agentMain ?? agentMainPath()),
      node: realpathSync(process.execPath),
      user: `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`,
      // Files kept by one node's engine only (no registry): the sandbox runs where they are.
      pinnedNode: layer?.node,
    });
    // The token's hand-off, as with the docker launcher: the agent reads and deletes it before it serves anything.
    writeFileSync(join(spec.dataDir, TOKEN_HANDOFF), `${spec.token}\n`, { mode: 0o600 });
    writeEnvHandoff(spec);
    trackService(this.docker, name, this.env.DOCKER_HOST);
    const created = await this.run(args, dockerCliEnv(this.env), Math.max(1_000, deadline - Date.now()));
    if (created.code !== 0) {
      egressFiles?.stopHosts();
      await this.run(["service", "rm", name]);
      liveServices.delete(name);
      throw new LaunchError(`docker service create for sandbox "${spec.sandbox}" failed (exit ${created.code}): ${created.stderr.trim().slice(-500)}`);
    }
    const { task, url } = await this.placed(name, deadline).catch(async (err: unknown) => {
      egressFiles?.stopHosts();
      await this.services.remove(name, 1_000);
      throw err;
    });
    const files: SandboxFiles = { rootDir: spec.rootDir, base, keep: true };
    this.live.set(spec.rootDir, { taskId: task.id, base });
    const exited = this.services.watch(name, task.id, files);
    void exited.then(() => egressFiles?.stopHosts());
    let gone = false;
    void exited.then(() => (gone = true));
    const failed = async (err: unknown): Promise<never> => {
      files.keep = false; // a start that failed leaves the sandbox's files as they were
      const last = await this.services.remove(name, 1_000, [task.id]);
      this.watcher.settleNow(task.id, last, `the task ${last?.state ?? "was removed"}`);
      const exit = await exited;
      throw new LaunchError(`${(err as Error).message}${exit.stderr.trim() ? `: ${exit.stderr.trim().slice(-500)}` : ""}`);
    };
    await waitHealthy({ url }, deadline, { gone: () => (gone ? "the agent's task stopped before it was healthy" : undefined), pollMs: 50 }).catch(failed);
    const nodeId = task.nodeId!;
    this.taskNodes.set(task.id, nodeId);
    void exited.then(() => this.taskNodes.delete(task.id));
    const node = this.swarmNodes.get(nodeId);
    return swarmTaskHandle({
      task: { ...task, nodeId },
      url,
      exited,
      placement: `on node ${node?.hostname ?? nodeId}`,
      engines: this.engines,
      stop: this.stopper(name, task.id, exited, files),
      egress: spec.egress && egressFiles ? { spec: spec.egress, token: spec.token, files: egressFiles, outbound: spec.outboundNetwork !== false } : undefined,
    }).catch(failed);
  }

  /** Waits until the swarm has placed the service's task and it runs, and answers the agent's URL on its node. */
  private async placed(service: string, deadline: number): Promise<{ task: TaskStatus; url: string }> {
    let last: TaskStatus | undefined;
    while (Date.now() < deadline) {
      const ids = (await this.run(["service", "ps", "--quiet", "--no-trunc", service])).stdout
        .split("\n")
        .map((s) => s.trim())
        .filter(Boolean);
      last = (await inspectTasks((a, t) => this.run(a, this.env, t), ids.slice(0, 1), AGENT_PORT))[0];
      if (last && TERMINAL_STATES.has(last.state)) {
        const on = last.nodeId ? ` on node ${(await this.engines.of(last.nodeId)).hostname}` : "";
        throw new LaunchError(`the swarm could not run service ${service}${on}: task ${last.state}${last.err ? `: ${last.err}` : ""}`);
      }
      if (last?.state === "running" && last.publishedPort && last.nodeId) {
        const nodes = await listNodes((a, t) => this.run(a, this.env, t));
        if (nodes) this.swarmNodes = nodes;
        const node = nodes?.get(last.nodeId);
        if (!node) throw new LaunchError(`service ${service} runs on node ${last.nodeId}, which the manager does not list`);
        return { task: last, url: `http://${this.reachable(node.addr)}:${last.publishedPort}` };
      }
      await sleep(100);
    }
    throw new LaunchError(`service ${service} was not running in time: task ${last?.state ?? "not created"}${last?.err ? `: ${last.err}` : ""}`);
  }

  /** A node address the simulator can dial: a manager advertised on loopback or 0.0.0.0 is DOCKER_HOST's host. */
  private reachable(addr: string): string {
    if (addr !== "0.0.0.0" && addr !== "127.0.0.1" && addr !== "") return addr;
    const remote = /^tcp:\/\/([^:/]+)/.exec(this.env.DOCKER_HOST ?? "")?.[1];
    return remote ?? "127.0.0.1";
  }

  /** Launcher.copyTree: a running sandbox's container committed on its node, a stopped one's layer tagged again. */
  async copyTree(source: string, target: string): Promise<void> {
    const live = this.live.get(source);
    const task = live ? (await inspectTasks((a, t) => this.run(a, this.env, t), [live.taskId], AGENT_PORT))[0] : undefined;
    await this.files.copy(source, target, live && task && !TERMINAL_STATES.has(task.state) ? { task, base: live.base } : undefined);
  }

  /** rm -rf, after untagging the images of the sandbox's files (on the node holding them, or the manager's copy of a registry's). */
  removeTree(path: string): void {
    removeLayersAndTree(this.docker, path, (layer) => (layer.node ? this.engines.envOf(layer.node) : undefined));
  }

  /** The handle's stop: the service removed (its files kept), the watch settled at once rather than at the next poll. */
  private stopper(service: string, taskId: string, exited: Promise<AgentExit>, files: SandboxFiles): AgentHandle["stop"] {
    let stopping: Promise<AgentExit> | undefined;
    return (graceMs = DEFAULT_STOP_GRACE_MS) =>
      (stopping ??= (async () => {
        const last = await this.services.remove(service, graceMs, [taskId], files);
        if (this.live.get(files.rootDir)?.taskId === taskId) this.live.delete(files.rootDir);
        this.watcher.settleNow(taskId, last, `the task ${last?.state ?? "was removed"} (stopped)`);
        return exited;
      })());
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    if (this.sweeper) clearInterval(this.sweeper);
    this.watcher.close();
  }
}
