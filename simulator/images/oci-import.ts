import { createHash } from "node:crypto";
import { closeSync, createReadStream, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { posix } from "node:path";
import { createGunzip } from "node:zlib";
import { imageConfigOf, type ImageConfig } from "./docker-source.js";
import { applyLayer, entryComponents, LayerError } from "./layer.js";
import type { Progress } from "./progress.js";

/**
 * Images the user imports: an OCI image layout directory (oci-layout,
 * index.json, blobs/sha256/...) or a `docker save` archive (manifest.json
 * naming layer tarballs), or either packed as a tar / tar.gz file. Layers are
 * applied in order with their whiteouts (layer.ts); OCI blobs are checked
 * against their digests as they are read.
 */

export class ImportError extends Error {}

export interface ImportedImage {
  /** The image's identity: a digest of its config and its layers' contents. */
  digest: string;
  config: ImageConfig;
  layers: number;
  /** Names the archive gives the image (docker save RepoTags, OCI ref.name annotations). */
  names: string[];
}

interface Descriptor {
  mediaType?: string;
  digest: string;
  size?: number;
  annotations?: Record<string, string>;
  platform?: { os?: string; architecture?: string };
}

const GZIP = [0x1f, 0x8b];
const ZSTD = [0x28, 0xb5, 0x2f, 0xfd];

function startsWith(path: string, magic: number[]): boolean {
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(magic.length);
    return readSync(fd, head, 0, magic.length, 0) === magic.length && magic.every((b, i) => head[i] === b);
  } finally {
    closeSync(fd);
  }
}

/**
 * Applies a layer or archive file (gunzipped when gzip; zstd is refused with
 * a reason), checking its digest when it has one. A mismatch is found once
 * the file is read: the build happens in a temp dir, thrown away on error.
 */
async function applyFile(root: string, path: string, digest?: string): Promise<string> {
  if (startsWith(path, ZSTD))
    throw new ImportError(`${posix.basename(path)}: zstd-compressed layers are not supported (re-save the image with gzip or uncompressed layers)`);
  const hash = createHash("sha256");
  const raw = createReadStream(path);
  raw.on("data", (chunk) => hash.update(chunk as Buffer));
  let stream: AsyncIterable<Buffer> = raw;
  if (startsWith(path, GZIP)) {
    const gunzip = createGunzip();
    raw.on("error", (err) => gunzip.destroy(err));
    stream = raw.pipe(gunzip);
  }
  await applyLayer(root, stream);
  const actual = `sha256:${hash.digest("hex")}`;
  if (digest?.startsWith("sha256:") && actual !== digest) throw new ImportError(`blob ${digest} does not match its content (${actual})`);
  return actual;
}

/** The file a relative name in the archive points at, refusing names that climb out of it. */
function inside(dir: string, name: string): string {
  return posix.join(dir, ...entryComponents(name));
}

function blobPath(dir: string, digest: string): string {
  const match = /^(sha256|sha512):([a-f0-9]+)$/.exec(digest);
  if (!match) throw new ImportError(`unsupported digest "${digest}"`);
  const path = posix.join(dir, "blobs", match[1]!, match[2]!);
  if (!existsSync(path)) throw new ImportError(`blob ${digest} is missing from the image layout`);
  return path;
}

const json = <T>(path: string): T => JSON.parse(readFileSync(path, "utf8")) as T;

/** Unpacks a `docker save` or OCI archive file into `dir` (it is just files). */
export async function unpackArchive(file: string, dir: string): Promise<void> {
  try {
    await applyFile(dir, file);
  } catch (err) {
    if (err instanceof LayerError || err instanceof ImportError) throw err;
    throw new ImportError(`${posix.basename(file)} is not an image archive (a tar or tar.gz of an OCI layout or of docker save): ${(err as Error).message}`);
  }
}

/** Whether a directory is an image this module can import. */
export function isImageLayout(dir: string): boolean {
  return existsSync(posix.join(dir, "manifest.json")) || existsSync(posix.join(dir, "index.json"));
}

function pickOciManifest(dir: string, wanted: string | undefined): { manifest: Descriptor; names: string[] } {
  let index = json<{ manifests?: Descriptor[] }>(posix.join(dir, "index.json"));
  let names: string[] = [];
  for (let depth = 0; depth < 4; depth++) {
    const entries = index.manifests ?? [];
    if (entries.length === 0) throw new ImportError("the OCI layout's index lists no image");
    names = [
      ...names,
      ...entries
        .map((m) => m.annotations?.["io.containerd.image.name"] ?? m.annotations?.["org.opencontainers.image.ref.name"])
        .filter((n): n is string => Boolean(n)),
    ];
    const named = wanted
      ? entries.find((m) =>
          [m.annotations?.["io.containerd.image.name"], m.annotations?.["org.opencontainers.image.ref.name"]].some(
            (n) => n && (n === wanted || wanted.endsWith(`:${n}`)),
          ),
        )
      : undefined;
    const chosen = named ?? entries.find((m) => !m.platform || (m.platform.os === "linux" && m.platform.architecture === "amd64")) ?? entries[0]!;
    if (!chosen.mediaType?.includes("index") && !chosen.mediaType?.includes("manifest.list")) return { manifest: chosen, names };
    index = json(blobPath(dir, chosen.digest));
  }
  throw new ImportError("the OCI layout's indexes nest too deep");
}

/**
 * Applies the image in `dir` (an OCI layout or a `docker save` directory)
 * onto rootfs. `wanted` picks one image when the archive holds several.
 */
export async function importLayout(dir: string, rootfs: string, progress: Progress, wanted?: string): Promise<ImportedImage> {
  let layers: { path: string; digest?: string }[];
  let configPath: string;
  let names: string[];
  if (existsSync(posix.join(dir, "manifest.json"))) {
    const entries = json<{ Config: string; RepoTags?: string[] | null; Layers: string[] }[]>(posix.join(dir, "manifest.json"));
    if (!Array.isArray(entries) || entries.length === 0) throw new ImportError("the archive's manifest.json lists no image");
    const entry = (wanted && entries.find((e) => e.RepoTags?.some((t) => t === wanted || t === `${wanted}:latest`))) || entries[0]!;
    configPath = inside(dir, entry.Config);
    layers = entry.Layers.map((l) => ({ path: inside(dir, l) }));
    names = entries.flatMap((e) => e.RepoTags ?? []);
  } else if (existsSync(posix.join(dir, "index.json"))) {
    const picked = pickOciManifest(dir, wanted);
    const manifest = json<{ config: Descriptor; layers: Descriptor[] }>(blobPath(dir, picked.manifest.digest));
    configPath = blobPath(dir, manifest.config.digest);
    layers = manifest.layers.map((l) => ({ path: blobPath(dir, l.digest), digest: l.digest }));
    names = picked.names;
  } else throw new ImportError("not an image: neither manifest.json (docker save) nor index.json (OCI image layout) found");
  const configText = readFileSync(configPath);
  const config = JSON.parse(configText.toString("utf8")) as { config?: Parameters<typeof imageConfigOf>[0] };
  // The image's identity covers its config and every layer's content (a config alone need not name its layers).
  const identity = createHash("sha256").update(configText);
  for (const [i, layer] of layers.entries()) {
    progress.phase(`applying layer ${i + 1}/${layers.length} (${(statSync(layer.path).size / 2 ** 20).toFixed(1)} MiB)`);
    identity.update(`\n${await applyFile(rootfs, layer.path, layer.digest)}`);
  }
  return { digest: `sha256:${identity.digest("hex")}`, config: imageConfigOf(config.config), layers: layers.length, names };
}
