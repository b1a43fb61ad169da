import { commitLayer, copyLayer, newFilesTag, readLayer, writeLayer, type EngineRun, type LayerRef } from "./docker-files.js";
import { registryRef } from "./swarm-args.js";
import type { NodeEngines } from "./swarm-nodes.js";
import type { TaskStatus } from "./swarm-tasks.js";

/**
 * A swarm sandbox's files between its tasks (docker-files.ts on a cluster): a task's container is committed by its
 * own node's engine (swarm-nodes.ts), since the manager cannot commit another node's container. With a registry
 * the committed layer is pushed there and the marker names the registry's copy, which any node pulls: the next
 * task may run anywhere. Without one it stays on that node and the marker names the node: the next task is
 * placed there (swarm-args.ts pinnedNode), and if that node is gone the sandbox's files are gone with it.
 */
export class SwarmFiles {
  constructor(
    private readonly engines: NodeEngines,
    /** The launcher's own daemon (the manager). */
    private readonly manager: EngineRun,
    private readonly registry?: string,
  ) {}

  private onNode(nodeId: string): EngineRun {
    return (args, timeoutMs) => this.engines.runOn(nodeId, args, timeoutMs);
  }

  /**
   * Commits a stopped task's container as the sandbox's files; resolves with why they could not be kept, if so, and
   * `release`, which untags the previous files' image on that node once the task's container is gone.
   */
  async keep(task: TaskStatus, rootDir: string, base: string): Promise<{ error?: string; release?: () => Promise<void> }> {
    if (!task.nodeId || !task.containerId) return { error: "the task has no container" };
    const nodeId = task.nodeId;
    try {
      const { ref, previous } = await commitLayer(this.onNode(nodeId), task.containerId, rootDir, base, this.registry ? undefined : nodeId);
      if (this.registry) await this.push(nodeId, ref, rootDir);
      return previous ? { release: async () => void (await this.onNode(nodeId)(["rmi", previous])) } : {};
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  /** A layer committed on a node, pushed to the registry under a name every node can pull; the marker then names that. */
  private async push(nodeId: string, ref: LayerRef, rootDir: string): Promise<void> {
    const run = this.onNode(nodeId);
    const target = registryRef(this.registry!, ref.image);
    const tagged = await run(["tag", ref.image, target]);
    const pushed = tagged.code === 0 ? await run(["push", "--quiet", target], 600_000) : tagged;
    if (pushed.code !== 0) throw new Error(`cannot push the sandbox's files to ${this.registry}: ${pushed.stderr.trim().slice(-300)}`);
    await run(["rmi", ref.image]);
    writeLayer(rootDir, { image: target, base: ref.base });
  }

  /** Launcher.copyTree: a running task's container committed on its node (`live`), else the stopped sandbox's layer tagged again. */
  async copy(source: string, target: string, live?: { task: TaskStatus; base: string }): Promise<void> {
    const { task } = live ?? {};
    if (live && task?.nodeId && task.containerId) {
      await copyLayer(this.onNode(task.nodeId), source, target, { container: task.containerId, base: live.base, node: task.nodeId });
      const copied = readLayer(target);
      if (copied && this.registry) await this.push(task.nodeId, copied, target);
      return;
    }
    const layer = readLayer(source);
    if (layer && !layer.node && this.registry) {
      // A registry's copy: pulled by the manager, pushed again under the copy's own name.
      await copyLayer(this.manager, source, target, undefined, { skipLayer: true });
      const copyRef = registryRef(this.registry, newFilesTag());
      for (const args of [
        ["pull", "--quiet", layer.image],
        ["tag", layer.image, copyRef],
        ["push", "--quiet", copyRef],
      ]) {
        const ran = await this.manager(args, 600_000);
        if (ran.code !== 0) throw new Error(`docker ${args[0]} ${args.at(-1)} failed: ${ran.stderr.trim().slice(-300)}`);
      }
      await this.manager(["rmi", copyRef, layer.image]);
      writeLayer(target, { image: copyRef, base: layer.base });
      return;
    }
    // A node's own layer is tagged again on that node.
    await copyLayer(layer?.node ? this.onNode(layer.node) : this.manager, source, target);
  }
}
