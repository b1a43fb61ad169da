import type { Ran } from "./docker-cli.js";

/**
 * What the swarm says about sandboxes' tasks, read through the manager (`docker inspect <task>`, `docker node
 * ls`): a task runs on some node, and Docker's `docker events` carry no task events, so one poll for all the
 * launcher's live tasks (two CLI calls a round, however many sandboxes) settles each task's exit once it stops,
 * is removed, or its node leaves the swarm or goes down.
 */

export type DockerRun = (args: string[], timeoutMs?: number) => Promise<Ran>;

export interface TaskStatus {
  id: string;
  state: string;
  /** Why the swarm failed or rejected it ("no suitable node ...", "starting container failed: ..."). */
  err?: string;
  nodeId?: string;
  exitCode?: number;
  /** The node port the agent's port is published on (mode=host). */
  publishedPort?: number;
  /** The task's container on its node (what that node's engine commits, pauses). */
  containerId?: string;
}

export interface NodeStatus {
  id: string;
  hostname: string;
  /** ready | down | unknown | disconnected */
  state: string;
  /** The node's address as the swarm knows it (its advertise address). */
  addr: string;
  /** manager | worker */
  role?: string;
  /** Its sandbox-kit.engine label (swarm-nodes.ts): where the simulator reaches its own engine. */
  engine?: string;
}

/** States after which a task never runs again (swarmkit's api.TaskState). */
export const TERMINAL_STATES = new Set(["complete", "shutdown", "failed", "rejected", "orphaned", "remove"]);

interface InspectedTask {
  ID: string;
  NodeID?: string;
  Status?: {
    State?: string;
    Err?: string;
    ContainerStatus?: { ExitCode?: number; ContainerID?: string };
    PortStatus?: { Ports?: { TargetPort?: number; PublishedPort?: number }[] };
  };
}

export function parseTasks(json: string, targetPort: number): TaskStatus[] {
  let parsed: InspectedTask[];
  try {
    parsed = JSON.parse(json || "[]") as InspectedTask[];
  } catch {
    return [];
  }
  return parsed.map((t) => ({
    id: t.ID,
    state: t.Status?.State ?? "unknown",
    err: t.Status?.Err || undefined,
    nodeId: t.NodeID || undefined,
    exitCode: t.Status?.ContainerStatus?.ExitCode,
    containerId: t.Status?.ContainerStatus?.ContainerID || undefined,
    publishedPort: t.Status?.PortStatus?.Ports?.find((p) => p.TargetPort === targetPort)?.PublishedPort,
  }));
}

/** `docker inspect` of several tasks: those that exist are printed even when one is gone (exit 1). */
export async function inspectTasks(run: DockerRun, ids: string[], targetPort: number): Promise<TaskStatus[]> {
  if (ids.length === 0) return [];
  const ran = await run(["inspect", "--type", "task", ...ids], 30_000);
  return parseTasks(ran.stdout, targetPort);
}

export async function listNodes(run: DockerRun): Promise<Map<string, NodeStatus> | undefined> {
  const ran = await run(["node", "ls", "--format", "{{.ID}}"], 30_000);
  if (ran.code !== 0) return undefined;
  const ids = ran.stdout
    .split("\n")
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length === 0) return new Map();
  const inspected = await run(
    [
      "node",
      "inspect",
      "--format",
      '{{json .ID}} {{json .Description.Hostname}} {{json .Status.State}} {{json .Status.Addr}} {{json .Spec.Role}} {{json (index .Spec.Labels "sandbox-kit.engine")}}',
      ...ids,
    ],
    30_000,
  );
  const nodes = new Map<string, NodeStatus>();
  for (const line of inspected.stdout.split("\n")) {
    const fields = line
      .trim()
      .match(/"(?:[^"\\]|\\.)*"/g)
      ?.map((f) => JSON.parse(f) as string);
    if (fields && fields.length >= 4)
      nodes.set(fields[0]!, { id: fields[0]!, hostname: fields[1]!, state: fields[2]!, addr: fields[3]!, role: fields[4], engine: fields[5] || undefined });
  }
  return nodes;
}

/** Why a task on this node will not be heard of again, or undefined while its node is in the swarm and up. */
export function nodeGone(nodeId: string | undefined, nodes: Map<string, NodeStatus>): string | undefined {
  if (!nodeId) return undefined;
  const node = nodes.get(nodeId);
  if (!node) return `its node ${nodeId} left the swarm`;
  if (node.state === "down" || node.state === "disconnected") return `its node ${node.hostname} (${nodeId}) is ${node.state}`;
  return undefined;
}

interface Watched {
  taskId: string;
  /** Settles the watch with the task's last status, and why it ended; `removed`: its service is already gone. */
  settle(status: TaskStatus | undefined, reason: string, removed?: boolean): void;
}

/** One poll for every live task of the launcher. */
export class TaskWatcher {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    private readonly run: DockerRun,
    private readonly targetPort: number,
    private readonly pollMs: number,
    /** Every poll's view of the swarm's nodes; undefined when the manager did not answer. */
    private readonly onNodes: (nodes: Map<string, NodeStatus> | undefined) => void = () => {},
  ) {}

  watch(taskId: string, settle: Watched["settle"]): void {
    this.watched.set(taskId, { taskId, settle });
    this.timer ??= setInterval(() => void this.poll(), this.pollMs);
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const ids = [...this.watched.keys()];
      const [tasks, nodes] = await Promise.all([inspectTasks(this.run, ids, this.targetPort), listNodes(this.run)]);
      this.onNodes(nodes);
      const byId = new Map(tasks.map((t) => [t.id, t]));
      for (const id of ids) {
        const watched = this.watched.get(id);
        if (!watched) continue;
        const task = byId.get(id);
        const gone = nodes ? nodeGone(task?.nodeId, nodes) : undefined;
        let reason: string | undefined;
        if (!task)
          reason = nodes ? "its service was removed" : undefined; // a manager that cannot answer says nothing about the task
        else if (TERMINAL_STATES.has(task.state)) reason = `the task ${task.state}${task.err ? `: ${task.err}` : ""}`;
        else if (gone) reason = gone;
        if (reason === undefined) continue;
        this.watched.delete(id);
        watched.settle(task, reason);
      }
    } finally {
      this.polling = false;
      if (this.watched.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    }
  }

  /** Settles a watch now (the launcher stopped and removed the task's service itself). */
  settleNow(taskId: string, status: TaskStatus | undefined, reason: string): void {
    const watched = this.watched.get(taskId);
    if (!watched) return;
    this.watched.delete(taskId);
    watched.settle(status, reason, true);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
