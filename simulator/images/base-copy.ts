import { accessSync, constants } from "node:fs";
import { imageConfigOf } from "./docker-source.js";
import { applyLayer } from "./layer.js";
import type { Progress } from "./progress.js";
import { runTool } from "./tools.js";

/**
 * A template built on a stored image is stored as that base's root
 * filesystem plus only the template's own layers: the base is copied as hard
 * links (`cp -al`: directories are new, no file's data is copied) and the
 * layers the build added are applied over it (layer.ts unlinks whatever it
 * replaces or deletes, so the base's shared inodes are never written). The
 * store's images stay plain directories (launchers, builders and the image's
 * config readers see one tree), removing either image leaves the other's
 * files in place, and the export no longer moves the whole base out of the
 * builder and back.
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
  /** The store's root filesystem of the base, and its digest (the label the builder's copy carries). */
  rootfs: string;
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
  const out = await runTool(docker, ["image", "inspect", "--format", "{{json .}}", ...names], { timeoutMs: 30_000 });
  return out.split("\n").filter(Boolean).map((line) => JSON.parse(line) as Inspected);
}

const readable = (dir: string) => {
  try {
    accessSync(dir, constants.R_OK | constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Fills an empty rootfs with a base's tree, hard-linked (default linkCopy; template-build.ts may have made it already). */
export type CopyBase = (base: StoredBase, rootfs: string) => Promise<void>;

const copyByLinks: CopyBase = (base, rootfs) => linkCopy(base.rootfs, rootfs);

/**
 * Unpacks the Docker image `tag` into rootfs as one of `bases` plus its own layers; undefined (rootfs
 * untouched) when no base is below it in the daemon or its layers cannot be read directly.
 */
export async function exportOntoBase(docker: string, tag: string, bases: StoredBase[], label: string, rootfs: string, progress: Progress, copyBase: CopyBase = copyByLinks) {
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
  progress.phase(`storing ${tag} as ${chosen.base.name} and its ${own.length} new layer${own.length === 1 ? "" : "s"}`);
  await copyBase(chosen.base, rootfs);
  let bytes = 0;
  for (const dir of own) {
    await runTool("tar", ["-C", dir, "--numeric-owner", "--xattrs", "--xattrs-include=trusted.overlay.*", "--xattrs-include=user.overlay.*", "-cf", "-", "."], {
      timeoutMs: 30 * 60_000,
      onStdout: async (stdout) => {
        bytes += (await applyLayer(rootfs, stdout, { whiteouts: "overlay" })).bytes;
      },
    });
  }
  return { digest: built.Id, config: imageConfigOf(built.Config), size: chosen.base.size + bytes };
}
