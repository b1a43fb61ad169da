import { accessSync, constants } from "node:fs";
import { inspectImagesViaSocket } from "./docker-api.js";
import { imageConfigOf } from "./docker-source.js";
import { applyLayer } from "./layer.js";
import type { Progress } from "./progress.js";
import { runTool } from "./tools.js";

/**
 * A template built on a stored image is stored as only its own layers,
 * stacked over that base: its image directory holds one overlay layer (the
 * layers the build added, applied in order by layer.ts with deletions kept as
 * overlayfs whiteouts) and its manifest names the base, whose root
 * filesystem is the next lower layer. The launcher mounts them as one
 * overlay (lowerdir=template:base, the sandbox's own layer on top), so
 * nothing of the base is copied or linked: storing a one-RUN template costs
 * what its RUN wrote. The store keeps a base while a template is stacked on
 * it (image-store.ts), and readers of an image's files look through its
 * layers top first (StoredImage.layers). Where a flat tree is needed (the
 * template given to a builder as the base of another), `materialise` makes
 * one: the bottom layer hard-linked (`cp -al`) and the others applied over it.
 *
 * The new layers come from Docker's overlay2 storage, where each layer is a
 * directory on disk (`docker image inspect`'s GraphDriver: UpperDir, then
 * LowerDir from the top down): the template's layers are those above the
 * base's (RootFS.Layers starts with the base's), read with GNU tar with their
 * overlay whiteouts. `docker save` would give the same layers as tars but
 * writes every layer, the base's too, through a temp dir first (5 s for
 * blaxel/base-image, more than the build). Where the daemon uses another
 * storage driver or its directories cannot be read (not root), the caller
 * falls back to the full export.
 */

export interface StoredBase {
  name: string;
  /** The store's root directories of the base (top first: StoredImage.layers), and its digest (the label the builder's copy carries). */
  layers: string[];
  digest: string;
  size: number;
}

interface Inspected {
  Id: string;
  Config?: Parameters<typeof imageConfigOf>[0] & { Labels?: Record<string, string> | null };
  RootFS?: { Layers?: string[] };
  GraphDriver?: { Name?: string; Data?: Record<string, string> | null };
}

/** `base`'s tree hard-linked into `rootfs` (an existing empty directory on the same filesystem). */
export async function linkCopy(base: string, rootfs: string): Promise<void> {
  await runTool("cp", ["-al", "--", `${base}/.`, `${rootfs}/`], { timeoutMs: 30 * 60_000 });
}

async function inspect(docker: string, names: string[]): Promise<Inspected[]> {
  const viaSocket = await inspectImagesViaSocket(names);
  if (viaSocket) {
    if (viaSocket.some((image) => image === null)) throw new Error(`no such image among ${names.join(", ")}`); // (the CLI fails the same way)
    return viaSocket as Inspected[];
  }
  const out = await runTool(docker, ["image", "inspect", "--format", "{{json .}}", ...names], { timeoutMs: 30_000 });
  return out
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Inspected);
}

const readable = (dir: string) => {
  try {
    accessSync(dir, constants.R_OK | constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** A layer directory as GNU tar reads it, with the overlay xattrs that say a directory is opaque. */
async function tarOfLayer(dir: string, onStdout: (stdout: NodeJS.ReadableStream) => Promise<unknown>): Promise<void> {
  await runTool("tar", ["-C", dir, "--numeric-owner", "--xattrs", "--xattrs-include=trusted.overlay.*", "--xattrs-include=user.overlay.*", "-cf", "-", "."], {
    timeoutMs: 30 * 60_000,
    onStdout: async (stdout) => {
      await onStdout(stdout);
    },
  });
}

/** An image's layers (top first) as one tree in `rootfs` (an existing empty directory on the same filesystem). */
export async function materialise(layers: string[], rootfs: string): Promise<void> {
  const [bottom, ...above] = [...layers].reverse();
  if (!bottom) return;
  await linkCopy(bottom, rootfs);
  for (const layer of above) await tarOfLayer(layer, (stdout) => applyLayer(rootfs, stdout as AsyncIterable<Buffer>, { whiteouts: "overlay" }));
}

/** overlayfs takes its options in one page: a template stacked deeper than this is stored whole instead. */
export const MAX_LOWERDIR_CHARS = 3000;

/**
 * Unpacks the Docker image `tag` into rootfs as one of `bases` plus its own layers; undefined (rootfs
 * untouched) when no base is below it in the daemon or its layers cannot be read directly.
 */
export async function exportOntoBase(docker: string, tag: string, bases: StoredBase[], label: string, rootfs: string, progress: Progress) {
  if (bases.length === 0) return undefined;
  let built: Inspected;
  let inBuilder: Inspected[];
  try {
    [built, ...inBuilder] = (await inspect(docker, [tag, ...bases.map((b) => b.name)])) as [Inspected, ...Inspected[]];
  } catch {
    return undefined;
  }
  if (inBuilder.length !== bases.length) return undefined;
  const layers = built.RootFS?.Layers ?? [];
  const driver = built.GraphDriver;
  if (driver?.Name !== "overlay2" || !driver.Data?.UpperDir) return undefined;
  const dirs = [driver.Data.UpperDir, ...(driver.Data.LowerDir ? driver.Data.LowerDir.split(":") : [])].reverse(); // bottom first, as RootFS.Layers
  if (dirs.length !== layers.length) return undefined;
  // The base: a store image the builder holds as made from that very store image, whose layers start the template's; the longest such.
  let chosen: { base: StoredBase; below: number } | undefined;
  for (const [i, image] of inBuilder.entries()) {
    const base = bases[i]!;
    const madeFrom = image.Config?.Labels?.[label] === base.digest || image.Id === base.digest;
    const below = image.RootFS?.Layers ?? [];
    if (!madeFrom || below.length === 0 || below.length > layers.length || below.some((l, j) => layers[j] !== l)) continue;
    if (!chosen || below.length > chosen.below) chosen = { base, below: below.length };
  }
  if (!chosen) return undefined;
  const own = dirs.slice(chosen.below);
  if (!own.every(readable)) return undefined;
  // (+80: the store renames rootfs to images/<64 hex digits>/rootfs)
  if ([rootfs, ...chosen.base.layers].join(":").length + 80 > MAX_LOWERDIR_CHARS) return undefined;
  progress.phase(`storing ${tag} as its ${own.length} new layer${own.length === 1 ? "" : "s"} over ${chosen.base.name}`);
  let bytes = 0;
  const below = chosen.base.layers;
  for (const dir of own)
    await tarOfLayer(dir, async (stdout) => (bytes += (await applyLayer(rootfs, stdout as AsyncIterable<Buffer>, { whiteouts: "overlay", below })).bytes));
  return { digest: built.Id, config: imageConfigOf(built.Config), size: chosen.base.size + bytes, base: chosen.base.digest };
}
