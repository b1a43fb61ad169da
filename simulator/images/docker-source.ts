import { applyLayer } from "./layer.js";
import type { Progress } from "./progress.js";
import { runTool } from "./tools.js";

/**
 * Images from a local Docker daemon: `docker image inspect` says whether the
 * daemon has the image (and gives its config and id), `docker create` +
 * `docker export` stream its flattened root filesystem, which is unpacked
 * like a single layer. Nothing is pulled: a name the daemon does not hold is
 * not found here.
 */

export interface ImageConfig {
  env: string[];
  workingDir: string;
  entrypoint: string[];
  cmd: string[];
  user: string;
}

export interface DockerImage {
  id: string;
  size: number;
  config: ImageConfig;
}

interface InspectedConfig {
  Env?: string[] | null;
  WorkingDir?: string;
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  User?: string;
}

export function imageConfigOf(config: InspectedConfig | undefined): ImageConfig {
  return {
    env: config?.Env ?? [],
    workingDir: config?.WorkingDir || "/",
    entrypoint: config?.Entrypoint ?? [],
    cmd: config?.Cmd ?? [],
    user: config?.User ?? "",
  };
}

/** The daemon's image of that name, or undefined when it has none (or no daemon runs). */
export async function inspectDockerImage(docker: string, name: string): Promise<DockerImage | undefined> {
  let out: string;
  try {
    out = await runTool(docker, ["image", "inspect", "--format", "{{json .}}", name], { timeoutMs: 30_000 });
  } catch {
    return undefined;
  }
  const image = JSON.parse(out) as { Id: string; Size?: number; Config?: InspectedConfig };
  return { id: image.Id, size: image.Size ?? 0, config: imageConfigOf(image.Config) };
}

/** Unpacks the image's root filesystem into rootfs (a stopped container, exported, then removed). */
export async function exportDockerImage(docker: string, name: string, rootfs: string, progress: Progress, expectedBytes = 0): Promise<void> {
  progress.phase(`exporting ${name} from the Docker daemon`);
  // A command is needed to create a container of an image without one (docker import makes such images); it never runs.
  const id = (await runTool(docker, ["create", "--entrypoint", "/", name], { timeoutMs: 60_000 })).trim();
  try {
    await runTool(docker, ["export", id], {
      timeoutMs: 30 * 60_000,
      onStdout: async (stdout) => {
        let done = 0;
        const counted = (async function* () {
          for await (const chunk of stdout) {
            done += (chunk as Buffer).length;
            progress.advance(done, expectedBytes > done ? expectedBytes : undefined);
            yield chunk as Buffer;
          }
        })();
        await applyLayer(rootfs, counted);
      },
    });
  } finally {
    await runTool(docker, ["rm", "-f", id], { timeoutMs: 60_000 }).catch(() => undefined);
  }
}
