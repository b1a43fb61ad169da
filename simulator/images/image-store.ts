import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { exportDockerImage, inspectDockerImage } from "./docker-source.js";
import { formatImageRef, parseImageRef, storeKey, type ImageRef } from "./image-ref.js";
import { withLock } from "./lock.js";
import { ImportError, importLayout, isImageLayout, unpackArchive } from "./oci-import.js";
import { sharedProgress, silentProgress, type Progress, type SharedProgress } from "./progress.js";
import { buildRecipe, HOST_APT_ARCHIVES, type BuildTools } from "./recipe-build.js";
import { HUB_IMAGES, isHubTag, recipeDigest, recipeFor, type Recipe } from "./recipes.js";
import { hexOf, ImageNotFoundError, type ImageManifest, type ImagePlan, type StoredImage } from "./store-records.js";
import { ImageFiles } from "./image-files.js";

/**
 * The image store: root filesystems on disk, built once and shared by every
 * sandbox made from them (read-only: the launcher lays each sandbox's own
 * writable layer over it). Content-addressed:
 *   <dir>/images/<digest hex>/rootfs         the root filesystem (a template stacked on a base: its own layer only)
 *   <dir>/images/<digest hex>/manifest.json  source, digest, size, created, config (and the base it is stacked on)
 *   <dir>/refs/<name:tag, escaped>.json      which digest a name points at
 *   <dir>/tmp/                               builds in progress (renamed into place when complete)
 *   <dir>/locks/                             one builder per image across processes
 * The digest is the identity of what the image was made from (a hub
 * recipe's definition, a Docker image id, an imported image's config and layers), so
 * two names of the same image share one root filesystem. See docs/images.md.
 */

export interface ImageStoreOptions {
  dir: string;
  /** npm's cache for the recipes' npm steps: default the user's own (npm_config_cache, ~/.npm) where it exists, else <dir>/npm-cache. */
  npmCache?: string;
  /** The host's apt archives, reused where they hold the image's package versions; null = not used. Default /var/cache/apt/archives. */
  hostAptArchives?: string | null;
  /** The docker CLI, or null for no Docker source. Default "docker" (skipped when not installed). */
  docker?: string | null;
  mmdebstrap?: string;
  npm?: string;
  mirror?: string;
}

export class ImageStore extends ImageFiles {
  private readonly docker: string | null;
  /** Builds under way in this process, by name and digest: a second caller joins the first's build and hears its progress. */
  private readonly building = new Map<string, { done: Promise<StoredImage>; progress: SharedProgress }>();
  /** Ends the builds' tools when the store is closed (a simulator stopping mid-build). */
  private readonly closing = new AbortController();

  constructor(private readonly options: ImageStoreOptions) {
    super(options.dir);
    this.docker = options.docker === undefined ? "docker" : options.docker;
  }

  /**
   * Where an image would come from, in order: the store (a name imported or
   * built before), a hub recipe (`blaxel/<name>`), the local Docker daemon, a
   * hub recipe by its bare name. Fast: nothing is built. Throws
   * ImageNotFoundError (or ImageRefError for a malformed name).
   */
  async locate(name: string): Promise<ImagePlan> {
    const ref = parseImageRef(name);
    const canonical = formatImageRef(ref);
    const stored = this.readRef(this.refPath(canonical));
    // An image the user imported or built under a name wins over every other source.
    if (stored?.manifest.source === "import" || stored?.manifest.source === "build") return { kind: "stored", image: stored };
    const recipe = recipeFor(ref, false);
    if (recipe && isHubTag(ref.tag)) return this.recipePlan(recipe);
    // (A recipe's build kept under a tag the hub does not publish, by an older version, is not served.)
    if (stored && stored.manifest.source !== "docker" && !recipe) return { kind: "stored", image: stored };
    const fromDocker = this.docker ? await inspectDockerImage(this.docker, name) : undefined;
    if (fromDocker) {
      if (stored?.manifest.digest === fromDocker.id) return { kind: "stored", image: stored };
      return { kind: "docker", ref: canonical, name, ...fromDocker };
    }
    if (stored?.manifest.source === "docker") return { kind: "stored", image: stored }; // exported before; the daemon is gone or no longer has it
    const bare = recipeFor(ref, true);
    if (bare && isHubTag(ref.tag)) return this.recipePlan(bare);
    const hub = recipe ?? bare;
    // A hub image under a tag the hub never published (blaxel/base-image:notexistingtag): not an image, as on the platform.
    if (hub)
      throw new ImageNotFoundError(
        name,
        this.supported(),
        `image "${name}" not found: the hub publishes blaxel/${hub.name} as "latest" and as release versions ("X.Y.Z"), not as "${ref.tag}"; use blaxel/${hub.name}:latest`,
      );
    throw new ImageNotFoundError(
      name,
      this.supported(),
      `image "${name}" not found: it is not a hub image (${HUB_IMAGES.join(", ")}), not in the image store (${this.dir})${this.docker ? ", and the local Docker daemon does not have it" : ""}; import it with: sandbox-sim images import <oci-dir-or-tar> --name ${canonical}`,
    );
  }

  /**
   * The image ready to use: built, exported or read from the store. One build per image: a caller in this
   * process joins a build under way (its progress reaches every caller), another process waits on the lock.
   */
  async ensure(name: string, progress: Progress = silentProgress): Promise<StoredImage> {
    const plan = await this.locate(name);
    if (plan.kind === "stored") return plan.image;
    return this.join(plan, progress);
  }

  /**
   * An image made from a recipe of the simulator's own other than the hub's (an official image's offline
   * stand-in, stand-ins.ts) under `name`: built once, as a hub image is, and again when the recipe changed.
   */
  ensureRecipe(name: string, recipe: Recipe, progress: Progress = silentProgress): Promise<StoredImage> {
    const ref = formatImageRef(parseImageRef(name));
    const digest = recipeDigest(recipe);
    const stored = this.readRef(this.refPath(ref));
    if (stored?.manifest.digest === digest) return Promise.resolve(stored);
    return this.join({ kind: "recipe", ref, recipe, digest }, progress);
  }

  /** Makes a planned image, or joins its build under way in this process. */
  private async join(plan: Exclude<ImagePlan, { kind: "stored" }>, progress: Progress): Promise<StoredImage> {
    const digest = plan.kind === "recipe" ? plan.digest : plan.id;
    const key = `${plan.ref}@${digest}`;
    let build = this.building.get(key);
    if (build) progress.note(`joining the build of ${plan.ref} under way${build.progress.current ? ` (${build.progress.current})` : ""}`);
    else {
      const shared = sharedProgress();
      build = { progress: shared, done: this.make(plan, digest, shared).finally(() => this.building.delete(key)) };
      this.building.set(key, build);
    }
    build.progress.listeners.add(progress);
    try {
      return await build.done;
    } finally {
      build.progress.listeners.delete(progress);
    }
  }

  /** Stops the builds under way (their tools are ended, they fail) and waits for their work dirs to be removed. */
  async close(): Promise<void> {
    this.closing.abort();
    await Promise.allSettled([...this.building.values()].map((b) => b.done));
  }

  private make(plan: Exclude<ImagePlan, { kind: "stored" }>, digest: string, progress: Progress): Promise<StoredImage> {
    return withLock(
      join(this.dir, "locks"),
      hexOf(digest),
      async () => {
        // Another process may have made it while this one waited.
        const again = this.readRef(this.refPath(plan.ref));
        if (again?.manifest.digest === digest) return again;
        if (!this.hasImage(digest)) {
          await this.install(digest, progress, async (rootfs) => {
            if (plan.kind === "recipe") {
              await buildRecipe(plan.recipe, rootfs, join(rootfs, ".."), this.buildTools(), progress);
              const r = plan.recipe;
              return {
                source: "recipe",
                origin: r.name,
                config: { env: r.env, workingDir: r.workingDir, entrypoint: [], cmd: [], user: "" },
                services: r.services,
                ports: r.ports,
              };
            }
            await exportDockerImage(this.docker!, plan.name, rootfs, progress, plan.size);
            return { source: "docker", origin: plan.id, config: plan.config, services: [], ports: [] };
          });
        }
        return this.point(plan.ref, digest);
      },
      { onWait: (holder) => progress.note(`waiting for another build of ${plan.ref}${holder ? ` (pid ${holder.pid})` : ""}`) },
    );
  }

  private buildTools(): BuildTools {
    const o = this.options;
    const userNpmCache = process.env.npm_config_cache || join(homedir(), ".npm");
    return {
      mmdebstrap: o.mmdebstrap ?? "mmdebstrap",
      npm: o.npm ?? "npm",
      mirror: o.mirror,
      npmCache: o.npmCache ?? (existsSync(userNpmCache) ? userNpmCache : join(this.dir, "npm-cache")),
      aptCache: join(this.dir, "apt-cache"),
      nodeCache: join(this.dir, "node-releases"),
      hostAptArchives: o.hostAptArchives === null ? undefined : (o.hostAptArchives ?? HOST_APT_ARCHIVES),
      signal: this.closing.signal,
    };
  }

  /** Rebuilds (or re-exports) an image even when the store has it. */
  async rebuild(name: string, progress: Progress = silentProgress): Promise<StoredImage> {
    const plan = await this.locate(name);
    if (plan.kind === "stored") {
      if (plan.image.manifest.source === "import")
        throw new ImageNotFoundError(name, this.supported(), `image "${name}" was imported: import it again instead`);
      if (plan.image.manifest.source === "build")
        throw new ImageNotFoundError(name, this.supported(), `image "${name}" was built from ${plan.image.manifest.origin}: build it again with --file`);
      this.removeImageDir(plan.image.manifest.digest);
    } else if (plan.kind === "recipe" || plan.kind === "docker") this.removeImageDir(plan.kind === "recipe" ? plan.digest : plan.id);
    return this.ensure(name, progress);
  }

  /** Imports an OCI image layout or `docker save` archive (directory, tar or tar.gz) under a name. */
  async import(path: string, name: string, progress: Progress = silentProgress): Promise<StoredImage> {
    const canonical = formatImageRef(parseImageRef(name));
    if (!existsSync(path)) throw new ImportError(`${path}: no such file or directory`);
    return withLock(join(this.dir, "locks"), storeKey(canonical), async () => {
      const work = this.workDir("import");
      const rootfs = join(work, "rootfs");
      mkdirSync(rootfs, { recursive: true });
      try {
        let layout = path;
        if (!isImageLayout(path)) {
          progress.phase(`reading ${path}`);
          layout = join(work, "archive");
          mkdirSync(layout);
          await unpackArchive(path, layout);
        }
        const imported = await importLayout(layout, rootfs, progress, name);
        await rm(join(work, "archive"), { recursive: true, force: true });
        if (!this.hasImage(imported.digest)) {
          await this.finish(work, imported.digest, { source: "import", origin: path, config: imported.config, services: [], ports: [] });
        }
        return this.point(canonical, imported.digest);
      } finally {
        await rm(work, { recursive: true, force: true }); // async: a failed build's tree can be large
      }
    });
  }

  /**
   * Stores what a builder made (template-build.ts) under a name: `produce` fills rootfs (scratch: a
   * directory for the builder's own output) and says the image's digest and config. Built in a temp
   * dir and renamed into place, so a failure leaves nothing in the store.
   */
  async installBuilt(
    name: string,
    origin: string,
    progress: Progress,
    produce: (rootfs: string, scratch: string) => Promise<{ digest: string; config: ImageManifest["config"]; size?: number; base?: string }>,
  ): Promise<StoredImage> {
    const canonical = formatImageRef(parseImageRef(name));
    return withLock(join(this.dir, "locks"), storeKey(canonical), async () => {
      const work = this.workDir("build");
      mkdirSync(join(work, "rootfs"), { recursive: true });
      mkdirSync(join(work, "scratch"));
      try {
        const built = await produce(join(work, "rootfs"), join(work, "scratch"));
        await rm(join(work, "scratch"), { recursive: true, force: true });
        if (built.base && !this.hasImage(built.base))
          throw new Error(`the image ${name} is built on (${built.base}) was removed from the store while it was built: build it again`);
        if (!this.hasImage(built.digest))
          await this.finish(
            work,
            built.digest,
            { source: "build", origin, config: built.config, services: [], ports: [], ...(built.base ? { base: built.base } : {}) },
            built.size,
          );
        progress.phase("done");
        return this.point(canonical, built.digest);
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    });
  }

  /** Points another name at an image the store has under `existing` (the build of an uploaded context: its own tag beside latest). */
  tag(existing: string, name: string): StoredImage {
    const image = this.get(existing);
    if (!image) throw new ImageNotFoundError(existing, this.supported(), `image "${existing}" is not in the store (${this.dir})`);
    return this.point(formatImageRef(parseImageRef(name)), image.manifest.digest);
  }

  /** Removes a name; its image goes too when no other name points at it. Returns whether the name existed. */
  remove(name: string): boolean {
    const canonical = formatImageRef(parseImageRef(name));
    const image = this.get(canonical);
    if (!image) return false;
    rmSync(this.refPath(canonical), { force: true });
    // The image goes when no name points at it and no image is stacked on it; then its base may go too.
    for (let digest: string | undefined = image.manifest.digest; digest && !this.inUse().has(hexOf(digest));) {
      const base: string | undefined = this.manifestOf(digest)?.base;
      this.removeImageDir(digest);
      digest = base;
    }
    return true;
  }

  /** Removes the images no name points at any more (an older build of a changed recipe, a re-exported Docker image); returns their digests. */
  prune(): string[] {
    const used = this.inUse();
    const unused = readdirSync(join(this.dir, "images")).filter((hex) => !used.has(hex));
    for (const hex of unused) this.removeImageDir(hex);
    return unused.map((hex) => `sha256:${hex}`);
  }

  /** What INVALID_IMAGE lists as supported: the hub images and the names in the store. */
  supported(): string[] {
    return [...new Set([...HUB_IMAGES, ...this.list().map((i) => i.ref)])];
  }

  private recipePlan(recipe: Recipe): ImagePlan {
    const ref = `blaxel/${recipe.name}:latest`;
    const digest = recipeDigest(recipe);
    const stored = this.readRef(this.refPath(ref));
    // An image the user imported under a hub name replaces the recipe.
    if (stored && (stored.manifest.digest === digest || stored.manifest.source === "import")) return { kind: "stored", image: stored };
    return { kind: "recipe", ref, recipe, digest };
  }
}

export { ImageRefError } from "./image-ref.js";
export { defaultImageCacheDir, ImageNotFoundError, type ImageManifest, type ImagePlan, type ImageSourceKind, type StoredImage } from "./store-records.js";
export type { ImageRef };
