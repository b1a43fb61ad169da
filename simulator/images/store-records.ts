import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { homedir } from "node:os";
import { join } from "node:path";
import type { ImageConfig } from "./docker-source.js";
import type { ImageService, Recipe } from "./recipes.js";

/** The image store's records (image-store.ts): manifests, what a name resolves to, and atomic writes. */

/** build: a template built from a Dockerfile (template-build.ts). */
export type ImageSourceKind = "recipe" | "docker" | "import" | "build";

export interface ImageManifest {
  /** Names pointing at this image ("blaxel/base-image:latest"). */
  refs: string[];
  source: ImageSourceKind;
  /** The recipe's name, the Docker image id, the imported file, or the Dockerfile built. */
  origin: string;
  digest: string;
  /** Bytes on disk of the root filesystem. */
  size: number;
  created: string;
  config: ImageConfig;
  /** Processes started beside the agent (the hub image's entrypoint). */
  services: ImageService[];
  ports: number[];
  /**
   * The store image this one is stacked on (a template over its base, base-copy.ts): rootfs then holds
   * only this image's own changes, as an overlay layer (deletions as whiteouts), over the base's layers.
   */
  base?: string;
}

export interface StoredImage {
  ref: string;
  /** The image's own directory: its whole root filesystem, or (manifest.base) its layer over the base. */
  rootfs: string;
  /** The root directories that make the image, top first: [rootfs], or rootfs over its base's layers. */
  layers: string[];
  manifest: ImageManifest;
}

/** What would provide an image: already in the store, or to be built, exported or pulled first. */
export type ImagePlan =
  | { kind: "stored"; image: StoredImage }
  | { kind: "recipe"; ref: string; recipe: Recipe; digest: string }
  | { kind: "docker"; ref: string; name: string; id: string; size: number; config: ImageConfig };

/** No source can provide the image (the platform's INVALID_IMAGE). */
export class ImageNotFoundError extends Error {
  constructor(
    readonly requested: string,
    readonly supported: string[],
    reason: string,
  ) {
    super(reason);
  }
}

/** The per-user image cache: $SANDBOX_SIM_IMAGE_CACHE, else $XDG_CACHE_HOME/sandbox-kit/images, else ~/.cache/sandbox-kit/images. */
export function defaultImageCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.SANDBOX_SIM_IMAGE_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "sandbox-kit", "images");
}

export const hexOf = (digest: string) => digest.replace(/^sha256:/, "");

export function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`;
  const fd = openSync(tmp, "w", 0o644);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}
