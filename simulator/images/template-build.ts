import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { materialise, type StoredBase } from "./base-copy.js";
import { type Builder, findBuilder } from "./builders.js";
import { externalImages, renameImages } from "./dockerfile-refs.js";
import { formatImageRef, parseImageRef } from "./image-ref.js";
import type { ImageStore } from "./image-store.js";
import { silentProgress, type Progress } from "./progress.js";
import { HUB_IMAGES, recipeDigest, recipeFor } from "./recipes.js";
import { SANDBOX_API_REPOSITORY, SANDBOX_API_STAND_IN, STAND_IN_DIGEST } from "./sandbox-api-stand-in.js";
import { NoStandIn, standInFor, type StandIn } from "./stand-ins.js";
import type { StoredImage } from "./store-records.js";
import { ToolError } from "./tools.js";

/**
 * Custom templates: `sandbox-sim images build <name> --file <Dockerfile>
 * <context>` builds the platform's sandbox template Dockerfiles into the
 * image store with a kept builder (builders.ts: docker build, else buildah),
 * offline. Before the builder runs, every image the Dockerfile names outside
 * itself (dockerfile-refs.ts) is made available to it: ghcr.io/blaxel-ai/sandbox
 * (any tag) is the simulator's image holding the sandbox-api stand-in; images
 * the store has (hub images included, built first when needed) are imported
 * into the builder from their root filesystems; others must be the builder's
 * already or pullable. The built image is exported into the store (a temp
 * dir renamed into place: a failed build leaves nothing) under the name: as
 * its own layers stacked over the store image it was built on where the
 * builder can say which those are (base-copy.ts), else its whole root filesystem.
 */

export class TemplateBuildError extends Error {}

export interface TemplateBuildOptions {
  /** The Dockerfile (default <context>/Dockerfile). */
  dockerfile?: string;
  buildArgs?: string[];
  /** The builder to use (default: findBuilder()). */
  builder?: Builder;
  progress?: Progress;
}

/** The builder-side name the template is built under (kept there: its layers are the next build's cache). */
export function builderTag(canonical: string): string {
  const ref = parseImageRef(canonical);
  const host = ref.registry ? `${ref.registry.replace(/[^a-z0-9]+/g, "-")}/` : "";
  return `sandbox-kit-templates/${host}${ref.repository}:${ref.tag}`;
}

function checkInputs(name: string, context: string, dockerfile: string): string {
  const ref = parseImageRef(name);
  const canonical = formatImageRef(ref);
  const hub = recipeFor(ref, false) ?? (ref.registry ? undefined : recipeFor(ref, true));
  if (hub)
    throw new TemplateBuildError(`"${name}" is the hub image blaxel/${hub.name}: give the template a name of its own (hub images: ${HUB_IMAGES.join(", ")})`);
  if (!existsSync(context) || !statSync(context).isDirectory())
    throw new TemplateBuildError(`the build context ${context} is not a directory (images build <name> --file <Dockerfile> <context dir>)`);
  if (!existsSync(dockerfile) || !statSync(dockerfile).isFile()) throw new TemplateBuildError(`the Dockerfile ${dockerfile} does not exist`);
  return canonical;
}

/** Builds a template into the store under `name`; returns the stored image. */
export async function buildTemplate(store: ImageStore, name: string, context: string, options: TemplateBuildOptions = {}): Promise<StoredImage> {
  const progress = options.progress ?? silentProgress;
  const contextDir = resolve(context);
  const dockerfile = resolve(options.dockerfile ?? join(contextDir, "Dockerfile"));
  const canonical = checkInputs(name, contextDir, dockerfile);
  let builder = options.builder;
  if (!builder) {
    const found = await findBuilder();
    if (!found.builder)
      throw new TemplateBuildError(
        `no image builder answers here (${found.unavailable.join("; ")}): start a Docker daemon, or install buildah (apt-get install -y buildah)`,
      );
    builder = found.builder;
  }
  const buildArgs = options.buildArgs ?? [];
  /** The store images given to the builder: the template's base is one of them. */
  const bases: StoredBase[] = [];
  /** What this build gave the builder (removed again when the build fails), and names given under another (a pinned digest's plain name). */
  const given: BuilderNames = { imported: [], renamed: new Map() };
  let file = dockerfile;
  const tag = builderTag(canonical);
  const log: string[] = [];
  try {
    const text = readFileSync(dockerfile, "utf8");
    for (const image of externalImages(text, buildArgs)) {
      const stored = await provide(store, builder, image, progress, given);
      if (stored) bases.push({ name: given.renamed.get(image) ?? image, layers: stored.layers, digest: stored.manifest.digest, size: stored.manifest.size });
    }
    if (given.renamed.size > 0) {
      // The builder cannot tag an image under a digest reference: the Dockerfile it reads names the plain one.
      file = join(store.dir, "tmp", `dockerfile-${process.pid}-${Date.now()}`);
      mkdirSync(join(store.dir, "tmp"), { recursive: true });
      writeFileSync(file, renameImages(text, buildArgs, given.renamed));
    }
    progress.phase(`building ${canonical} with ${builder.command} (${dockerfile})`);
    await builder.build(tag, file, contextDir, buildArgs, (line) => {
      log.push(line);
      progress.note(line);
    });
  } catch (err) {
    // Nothing of a failed build stays in the builder: what the simulator tagged for it goes (the builder's
    // --force-rm took the failed step's container).
    for (const name of given.imported) await builder.remove(name);
    if (!(err instanceof ToolError)) throw err;
    const tail = log.slice(-40).join("\n");
    const first = err.message.split("\n")[0]!;
    // "exit code 1" out of runTool's "docker build failed (exit code 1):"; before the build, the tool's whole message.
    const why = log.length ? (/failed \(([^)]*)\)/.exec(first)?.[1] ?? first) : err.message;
    throw new TemplateBuildError(
      `${log.length ? `${builder.command} of ${dockerfile}` : "preparing the build's images"} failed (${why})${tail ? `\n--- build log (last lines) ---\n${tail}` : ""}`,
    );
  } finally {
    if (file !== dockerfile) await rm(file, { force: true });
  }
  return await store.installBuilt(
    canonical,
    dockerfile,
    progress,
    async (rootfs, work) => (await builder.exportOntoBase?.(tag, bases, rootfs, progress)) ?? builder.exportImage(tag, rootfs, work, progress),
  );
}

interface BuilderNames {
  imported: string[];
  renamed: Map<string, string>;
}

/**
 * Makes one image the Dockerfile names available to the builder, or says which is missing and how to
 * provide it. Returns the store's image when the builder's copy may be it (a possible base).
 */
async function provide(store: ImageStore, builder: Builder, name: string, progress: Progress, given: BuilderNames): Promise<StoredImage | undefined> {
  let ref;
  try {
    ref = parseImageRef(name);
  } catch (err) {
    throw new TemplateBuildError(`the Dockerfile names an invalid image "${name}": ${(err as Error).message}`);
  }
  if (`${ref.registry ?? ""}/${ref.repository}` === SANDBOX_API_REPOSITORY) {
    await provideStandIn(store, builder, formatImageRef(ref), progress, given);
    return undefined;
  }
  const stored = store.get(name);
  if (stored && (stored.manifest.source === "import" || stored.manifest.source === "build")) return importInto(store, builder, name, stored, progress, given);
  if (recipeFor(ref, false)) return importInto(store, builder, name, await store.ensure(name, progress), progress, given);
  let standIn: StandIn | undefined;
  let noStandIn: string | undefined;
  try {
    standIn = standInFor(ref);
  } catch (err) {
    if (!(err instanceof NoStandIn)) throw err;
    noStandIn = err.message;
  }
  const local = await builder.localImage(name);
  const standInDigest = standIn && recipeDigest(standIn.recipe);
  if (local && standIn && local.label === standInDigest) {
    progress.note(`${name}: sandbox-kit's offline stand-in (${standIn.note}), given to ${builder.kind} before`);
    return store.get(standIn.name) ?? stored;
  }
  // The builder's own image is used as it is (a Docker image the store exported: the same when the ids match),
  // unless it is an older stand-in of the simulator's (its recipe changed since): that one is made again.
  if (local && !(standIn && local.label)) return stored;
  if (stored) return importInto(store, builder, name, stored, progress, given);
  progress.phase(`pulling ${name}`);
  let pullError: string;
  try {
    await builder.pull(name);
    return undefined;
  } catch (err) {
    pullError = (err as Error).message.split("\n").filter(Boolean).slice(-1)[0] ?? "";
  }
  if (standIn) {
    // A pinned digest cannot be the stand-in's (nor a tag the builder can give): it goes under its plain name.
    const as = ref.digest ? formatImageRef({ ...ref, digest: undefined }) : name;
    progress.note(
      `${name} cannot be pulled (no registry answers): using sandbox-kit's offline stand-in (${standIn.note})${as !== name ? `, tagged ${as}: the pinned digest is not checked` : ""}`,
    );
    if (as !== name) given.renamed.set(name, as);
    return importInto(store, builder, as, await store.ensureRecipe(standIn.name, standIn.recipe, progress), progress, given);
  }
  const bare = recipeFor(ref, true);
  if (bare) {
    progress.note(`${name} cannot be pulled: using the hub's blaxel/${bare.name} (Debian) under that name`);
    return importInto(store, builder, name, await store.ensure(`blaxel/${bare.name}`, progress), progress, given);
  }
  throw new TemplateBuildError(
    `base image "${name}" not found: it is not a hub image (${HUB_IMAGES.join(", ")}), not in the image store (${store.dir}), ` +
      `not among ${builder.kind}'s images, pulling it failed (${pullError}), and ${noStandIn ?? "sandbox-kit has no offline stand-in for it (node:<major>[-slim|-alpine], python:3.<minor>[-slim|-alpine], debian:<suite>[-slim])"}. ` +
      `Provide it with: sandbox-sim images import <oci-dir-or-tar> --name ${name}` +
      (builder.kind === "docker" ? `, or docker load / docker pull it into the Docker daemon` : `, or buildah pull it`),
  );
}

/** A store image under `name` in the builder, unless the builder already has this very image there. */
async function importInto(
  store: ImageStore,
  builder: Builder,
  name: string,
  image: StoredImage,
  progress: Progress,
  given: BuilderNames,
): Promise<StoredImage> {
  const local = await builder.localImage(name);
  if (local?.label === image.manifest.digest) return image;
  progress.phase(`giving ${builder.kind} the store's ${image.ref} as ${name}`);
  given.imported.push(name);
  if (image.layers.length === 1) {
    await builder.importRootfs(image.rootfs, name, image.manifest.config, image.manifest.digest);
    return image;
  }
  // A template stacked over its base (base-copy.ts): the builder takes one tree.
  const dir = join(store.dir, "tmp", `flat-${process.pid}-${Date.now()}`); // (named for this process: removed after a crash too)
  try {
    mkdirSync(dir, { recursive: true });
    await materialise(image.layers, dir);
    await builder.importRootfs(dir, name, image.manifest.config, image.manifest.digest);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return image;
}

/** ghcr.io/blaxel-ai/sandbox:<tag>: an image of one file, /sandbox-api, the stand-in. */
async function provideStandIn(store: ImageStore, builder: Builder, name: string, progress: Progress, given: BuilderNames): Promise<void> {
  const local = await builder.localImage(name);
  if (local?.label === STAND_IN_DIGEST) return;
  progress.phase(`giving ${builder.kind} sandbox-kit's sandbox-api stand-in as ${name}`);
  given.imported.push(name);
  const dir = join(store.dir, "tmp", `standin-${process.pid}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, "sandbox-api"), SANDBOX_API_STAND_IN, { mode: 0o755 });
    await builder.importRootfs(dir, name, { env: [], workingDir: "/" }, STAND_IN_DIGEST);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
