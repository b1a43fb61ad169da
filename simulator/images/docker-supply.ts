import { mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { ImageSupply, ImageTarget } from "../launcher/types.js";
import { materialise } from "./base-copy.js";
import { DockerBuilder } from "./builders.js";
import { ImageNotFoundError, type ImageStore } from "./image-store.js";
import { callbackProgress } from "./progress.js";

/**
 * Images reaching the Docker engines of the docker and swarm launchers (Launcher.useImages): a create names a hub
 * image, a stored image or a template, all of which live in the simulator's image store, not in Docker. Before a
 * start the launcher asks for its image in the engine that runs it (the local daemon, a swarm's manager): one
 * that has it (the store's copy, by its digest label, or an image the user put there under that name) is used
 * as it is; otherwise the store provides it (a hub image built on first use) and it is `docker import`ed under
 * its name with its Env and WorkingDir, each step in the sandbox's events. One import per engine and image at a
 * time: concurrent creates of one image wait for the same import.
 */
export function dockerImageSupply(store: ImageStore, onProgress: (workspace: string, sandbox: string, text: string) => void, docker = "docker"): ImageSupply {
  const inFlight = new Map<string, Promise<void>>();
  return {
    provide(image: string, target: ImageTarget): Promise<void> {
      const key = `${target.env.DOCKER_HOST ?? ""}\0${image}`;
      let running = inFlight.get(key);
      if (!running) {
        running = provideOnce(store, docker, image, target, (text) => onProgress(target.workspace, target.sandbox, text)).finally(() => inFlight.delete(key));
        inFlight.set(key, running);
      }
      return running;
    },
  };
}

async function provideOnce(store: ImageStore, docker: string, image: string, target: ImageTarget, report: (text: string) => void): Promise<void> {
  const builder = new DockerBuilder(docker, target.env);
  const local = await builder.localImage(image);
  const stored = store.get(image);
  // The user's own image under that name (no digest label), or the store's very copy: nothing to do.
  if (local && (local.label === "" || !stored || local.label === stored.manifest.digest)) return;
  let source;
  try {
    source = stored ?? (await store.ensure(image, callbackProgress(report)));
  } catch (err) {
    const why = err instanceof ImageNotFoundError ? "no source provides it (not a hub image, not in the image store)" : (err as Error).message;
    throw new Error(`image ${image} is not in the Docker engine of ${target.node} and cannot be given to it: ${why}`);
  }
  report(`importing ${image} into the Docker engine of ${target.node}`);
  try {
    if (source.layers.length === 1) {
      await builder.importRootfs(source.rootfs, image, source.manifest.config, source.manifest.digest);
      return;
    }
    // A template stacked over its base (base-copy.ts): Docker takes one tree.
    const dir = join(store.dir, "tmp", `docker-flat-${process.pid}-${Date.now()}`);
    try {
      mkdirSync(dir, { recursive: true });
      await materialise(source.layers, dir);
      await builder.importRootfs(dir, image, source.manifest.config, source.manifest.digest);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  } catch (err) {
    throw new Error(`cannot import ${image} into the Docker engine of ${target.node}: ${(err as Error).message}`);
  }
}
