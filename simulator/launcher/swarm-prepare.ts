import type { Ran } from "./docker-cli.js";
import { ensureImage } from "./docker-images.js";
import { registryRef, SWARM_LABELS, workspaceNetwork } from "./swarm-args.js";
import type { NodeEngines } from "./swarm-nodes.js";
import { LaunchError, type ImageSupply, type LaunchSpec } from "./types.js";

/**
 * What a swarm sandbox's start needs on the cluster first: its image where every node can get it (given to the
 * manager's engine from the simulator's image store when it lacks it, then, with a registry, pushed there under
 * the registry's name, again whenever the manager's image changes), and its workspace's overlay network.
 */
export class SwarmPrepare {
  private readonly networks = new Map<string, Promise<void>>();
  /** Image id pushed per registry reference: a rebuilt image is pushed again. */
  private readonly pushed = new Map<string, Promise<string>>();
  private localNode: Promise<string> | undefined;

  constructor(
    /** The manager's engine. */
    private readonly run: (args: string[], timeoutMs?: number) => Promise<Ran>,
    private readonly engines: NodeEngines,
    private readonly env: NodeJS.ProcessEnv,
    private readonly registry?: string,
  ) {}

  /** The reference nodes run for `image`: the image itself, or (with a registry) its copy there. */
  async image(spec: LaunchSpec, image: string, supply: ImageSupply | undefined): Promise<string> {
    this.localNode ??= this.run(["info", "--format", "{{.Swarm.NodeID}}"], 15_000).then((r) => r.stdout.trim());
    const manager = await this.engines.of(await this.localNode);
    await ensureImage(this.run, image, { supply, workspace: spec.workspace, sandbox: spec.sandbox, node: `the manager ${manager.hostname}`, env: this.env });
    const registry = this.registry;
    if (!registry) return image;
    const local = await this.run(["image", "inspect", "--format", "{{.Id}}", image]);
    if (local.code !== 0) return image; // not built here: the nodes pull it from where its name says
    const target = registryRef(registry, image);
    const key = `${target}@${local.stdout.trim()}`;
    let pushed = this.pushed.get(key);
    if (!pushed) {
      pushed = (async () => {
        const tagged = await this.run(["tag", image, target]);
        const push = tagged.code === 0 ? await this.run(["push", "--quiet", target], 600_000) : tagged;
        if (push.code !== 0) throw new LaunchError(`cannot push ${image} to the swarm's registry as ${target}: ${push.stderr.trim().slice(-300)}`);
        return target;
      })();
      this.pushed.set(key, pushed);
      pushed.catch(() => this.pushed.delete(key));
    }
    return pushed;
  }

  /** The workspace's overlay network (made once, attachable, labelled with the workspace). */
  network(workspace: string): Promise<void> {
    const name = workspaceNetwork(workspace);
    let made = this.networks.get(name);
    if (!made) {
      made = (async () => {
        if ((await this.run(["network", "inspect", "--format", "{{.ID}}", name])).code === 0) return;
        const created = await this.run(["network", "create", "--driver", "overlay", "--attachable", "--label", `${SWARM_LABELS.workspace}=${workspace}`, name]);
        // Another simulator (or start) may have made it in between.
        if (created.code !== 0 && (await this.run(["network", "inspect", "--format", "{{.ID}}", name])).code !== 0) {
          throw new LaunchError(`cannot create the overlay network ${name} for workspace "${workspace}": ${created.stderr.trim().slice(-300)}`);
        }
      })();
      this.networks.set(name, made);
      made.catch(() => this.networks.delete(name));
    }
    return made;
  }
}
