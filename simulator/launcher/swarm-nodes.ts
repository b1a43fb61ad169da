import type { Ran } from "./docker-cli.js";
import type { NodeStatus } from "./swarm-tasks.js";
import type { LauncherNode } from "./types.js";

/**
 * The engines of a swarm's nodes, for what only a node's own engine does (a task's container is not the
 * manager's to commit or pause): the manager's own node is the launcher's daemon; another node is reachable
 * where it carries the label `sandbox-kit.engine=<DOCKER_HOST>` (`npm run cluster` labels its nodes so:
 * tcp://<node address>:2375). Nodes without one are reported as such (their sandboxes' files are not kept
 * between tasks and they never go to standby).
 */
export const ENGINE_LABEL = "sandbox-kit.engine";

export interface NodeEngine {
  nodeId: string;
  hostname: string;
  /** The docker CLI's environment for this node's engine; undefined where it cannot be reached. */
  env?: NodeJS.ProcessEnv;
}

type Run = (args: string[], env?: NodeJS.ProcessEnv, timeoutMs?: number) => Promise<Ran>;

export class NodeEngines {
  private readonly known = new Map<string, Promise<NodeEngine>>();
  /** The engines already looked up, for synchronous callers (Launcher.removeTree). */
  private readonly resolved = new Map<string, NodeEngine>();
  private localNode: Promise<string> | undefined;
  /** The launcher's own node once known, for synchronous callers (/health). */
  localId: string | undefined;

  constructor(
    private readonly run: Run,
    /** The launcher's CLI environment (its manager). */
    private readonly base: NodeJS.ProcessEnv = process.env,
  ) {}

  /** The node the launcher's daemon itself is (a manager). */
  local(): Promise<string> {
    return (this.localNode ??= this.run(["info", "--format", "{{.Swarm.NodeID}}"], this.base, 15_000).then((r) => (this.localId = r.stdout.trim())));
  }

  of(nodeId: string): Promise<NodeEngine> {
    let found = this.known.get(nodeId);
    if (!found) {
      found = (async () => {
        const inspected = await this.run(
          ["node", "inspect", "--format", `{{.Description.Hostname}} {{index .Spec.Labels "${ENGINE_LABEL}"}}`, nodeId],
          this.base,
          15_000,
        );
        const [hostname = nodeId, label = ""] = inspected.stdout.trim().split(" ");
        if (nodeId === (await this.local())) return { nodeId, hostname, env: this.base };
        const engine = label && label !== "<no value>" ? label : undefined;
        return { nodeId, hostname, env: engine ? { ...this.base, DOCKER_HOST: engine } : undefined };
      })();
      this.known.set(nodeId, found);
      // A failed look-up (the manager busy) is asked again next time.
      found.then(
        (e) => (e.hostname === nodeId ? this.known.delete(nodeId) : this.resolved.set(nodeId, e)),
        () => this.known.delete(nodeId),
      );
    }
    return found;
  }

  /** The CLI's environment for a node already looked up, else undefined. */
  envOf(nodeId: string): NodeJS.ProcessEnv | undefined {
    return this.resolved.get(nodeId)?.env;
  }

  /** Runs the docker CLI against the node's engine, or says why it cannot. */
  async runOn(nodeId: string, args: string[], timeoutMs?: number): Promise<Ran> {
    const engine = await this.of(nodeId);
    if (!engine.env) return { code: null, stdout: "", stderr: `the engine of node ${engine.hostname} is not reachable (no ${ENGINE_LABEL} label)` };
    return this.run(args, engine.env, timeoutMs);
  }

  /** Standby through the node's own engine: `docker pause` / `unpause` of the task's container (the cgroup freezer). */
  pausing(nodeId: string, container: string): { freeze(): Promise<void>; thaw(): Promise<void>; resumed(): Promise<void> } {
    let paused = false;
    return {
      resumed: async () => {
        if (paused) await this.runOn(nodeId, ["unpause", container]);
        paused = false;
      },
      freeze: async () => {
        paused = true;
        const ran = await this.runOn(nodeId, ["pause", container]);
        if (ran.code !== 0) throw new Error(`docker pause of ${container} on its node failed: ${ran.stderr.trim()}`);
      },
      thaw: async () => {
        const ran = await this.runOn(nodeId, ["unpause", container]);
        if (ran.code !== 0 && !/is not paused/.test(ran.stderr)) throw new Error(`docker unpause of ${container} on its node failed: ${ran.stderr.trim()}`);
        paused = false;
      },
    };
  }
}

/**
 * /health's nodes: the swarm's as last seen, with how many of the launcher's live tasks each runs and whether
 * the simulator reaches its own engine (the manager's own node is the launcher's daemon).
 */
export function nodeList(nodes: Map<string, NodeStatus>, taskNodes: Map<string, string>, localId?: string): LauncherNode[] {
  const counts = new Map<string, number>();
  for (const nodeId of taskNodes.values()) counts.set(nodeId, (counts.get(nodeId) ?? 0) + 1);
  return [...nodes.values()]
    .map((n) => ({
      name: n.hostname,
      state: n.state,
      role: n.role ?? "",
      address: n.addr,
      sandboxes: counts.get(n.id) ?? 0,
      engine: engineOf(n, localId),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

function engineOf(node: NodeStatus, localId?: string): NonNullable<LauncherNode["engine"]> {
  if (node.id === localId) return { reachable: true, via: "the launcher's own Docker daemon" };
  if (node.engine) return { reachable: true, via: node.engine };
  return {
    reachable: false,
    why: `no ${ENGINE_LABEL} label: its sandboxes never go to standby (docker pause is the node's own) and cannot start with a policy restricting destinations (the cut of their direct outbound is the node's own)`,
  };
}
