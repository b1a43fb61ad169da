import type { Ran } from "./docker-cli.js";
import { LaunchError, type ImageSupply } from "./types.js";

/** What ensureImage needs: the simulator's supply (none with --image-source host), and who asks. */
export interface ImageRequest {
  supply?: ImageSupply;
  workspace: string;
  sandbox: string;
  /** "this host", or a swarm node's hostname. */
  node: string;
  /** The CLI's environment for the engine (DOCKER_HOST...). */
  env?: NodeJS.ProcessEnv;
}

/**
 * Makes sure the engine `run` talks to has `image` before a container or service is made of it: through the
 * simulator's image store (ImageSupply) when there is one, else it must be there already (or pullable by the
 * engine: docker run pulls by itself). The error names the image and the engine.
 */
export async function ensureImage(run: (args: string[], timeoutMs?: number) => Promise<Ran>, image: string, request: ImageRequest): Promise<void> {
  if (request.supply) {
    try {
      await request.supply.provide(image, { workspace: request.workspace, sandbox: request.sandbox, node: request.node, env: request.env ?? process.env });
    } catch (err) {
      throw new LaunchError((err as Error).message);
    }
    return;
  }
  const found = await run(["image", "inspect", "--format", "{{.Id}}", image], 30_000);
  if (found.code === 0) return;
  const pulled = await run(["pull", "--quiet", image], 600_000);
  if (pulled.code !== 0)
    throw new LaunchError(
      `image ${image} is not in the Docker engine of ${request.node} and cannot be pulled there: ${pulled.stderr.trim().split("\n").pop()?.slice(0, 300)}`,
    );
}
