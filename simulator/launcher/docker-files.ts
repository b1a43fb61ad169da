import { execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Ran } from "./docker-cli.js";

/**
 * A sandbox's files under the docker and swarm launchers: the image's `/` with the sandbox's writes in the
 * container's own layer, as on the platform (one `/` for the file API and for commands). Between two containers
 * of a sandbox (a restart, archive then unarchive, a crash) Docker keeps them: the stopped container's layer is
 * committed (`docker commit`) as an image of its own, `sandbox-kit-files:<random>`, and the next container runs
 * that image. The sandbox's root directory on the host then holds one file, LAYER_MARKER, naming that image
 * (and the node whose engine holds it, on a swarm without a registry), so everything the simulator does with a
 * sandbox's root directory keeps working through Docker:
 *   snapshot, fork      Launcher.copyTree: a running sandbox's container is committed (paused for the commit),
 *                       a stopped one's image tagged again; the copy's marker names an image of its own
 *   retention, delete   the marker moves with the directory; Launcher.removeTree untags its image (Docker
 *                       deletes the layers no other tag or container uses)
 * Every marker names a tag no other marker names, so removing one never takes another sandbox's files.
 */

export const LAYER_MARKER = ".sandbox-kit-layer.json";
export const FILES_REPOSITORY = "sandbox-kit-files";

export interface LayerRef {
  /** The image holding the sandbox's files (its image plus its writes). */
  image: string;
  /** The image the sandbox was made from: a layer over another image is not reused once spec.runtime.image changes. */
  base: string;
  /** Swarm without a registry: the node whose engine holds `image` (the sandbox's next task is placed there). */
  node?: string;
}

export type EngineRun = (args: string[], timeoutMs?: number) => Promise<Ran>;

export function readLayer(rootDir: string): LayerRef | undefined {
  try {
    const parsed = JSON.parse(readFileSync(join(rootDir, LAYER_MARKER), "utf8")) as Partial<LayerRef>;
    return typeof parsed.image === "string" && typeof parsed.base === "string" ? (parsed as LayerRef) : undefined;
  } catch {
    return undefined;
  }
}

/** Written to a temporary name and renamed: a marker is whole or absent. */
export function writeLayer(rootDir: string, ref: LayerRef): void {
  mkdirSync(rootDir, { recursive: true });
  const staging = join(rootDir, `${LAYER_MARKER}.${randomBytes(4).toString("hex")}`);
  writeFileSync(staging, JSON.stringify(ref));
  renameSync(staging, join(rootDir, LAYER_MARKER));
}

export function newFilesTag(): string {
  return `${FILES_REPOSITORY}:${randomBytes(8).toString("hex")}`;
}

/** The image a start runs: the sandbox's own layer when it has one over the same image, else the image. */
export function startImage(rootDir: string, base: string): { image: string; layer?: LayerRef } {
  const layer = readLayer(rootDir);
  if (layer && layer.base === base) return { image: layer.image, layer };
  return { image: base };
}

/**
 * Commits a container's layer (a stopped one, or a running one paused while it is read) as the sandbox's files:
 * a new tag, the marker rewritten to name it. Resolves with the previous tag (this marker's own), which the caller
 * removes once the container is gone (Docker refuses to untag an image a container still uses). Throws with
 * Docker's reason when the commit fails; the marker then still names the previous files.
 */
export async function commitLayer(
  run: EngineRun,
  container: string,
  rootDir: string,
  base: string,
  node?: string,
): Promise<{ ref: LayerRef; previous?: string }> {
  const tag = newFilesTag();
  const committed = await run(["commit", container, tag], 600_000);
  if (committed.code !== 0) throw new Error(`docker commit of ${container} failed: ${committed.stderr.trim().slice(-300)}`);
  const previous = readLayer(rootDir);
  const ref: LayerRef = { image: tag, base, ...(node ? { node } : {}) };
  writeLayer(rootDir, ref);
  return { ref, previous: previous && previous.image !== tag ? previous.image : undefined };
}

/** A second tag for a layer image (the copy's own), on the engine holding it. */
export async function tagLayer(run: EngineRun, layer: LayerRef): Promise<LayerRef> {
  const tag = newFilesTag();
  const tagged = await run(["tag", layer.image, tag]);
  if (tagged.code !== 0) throw new Error(`docker tag of ${layer.image} failed: ${tagged.stderr.trim().slice(-300)}`);
  return { ...layer, image: tag };
}

/**
 * Every marker at or under `path`, five levels deep: a sandbox's root, its directory, a workspace's, a snapshot's,
 * a simulator's whole temp dir (<dir>/sandboxes/<workspace>/<sandbox>/root). Symbolic links are not followed.
 */
export function markersUnder(path: string, depth = 5): LayerRef[] {
  const found: LayerRef[] = [];
  const here = readLayer(path);
  if (here) found.push(here);
  if (depth === 0) return found;
  let entries: string[] = [];
  try {
    entries = readdirSync(path, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return found;
  }
  for (const name of entries) found.push(...markersUnder(join(path, name), depth - 1));
  return found;
}

/**
 * rm -rf of a directory the simulator removes (a retired sandbox, a snapshot, a workspace), after untagging the
 * layer images its markers name (synchronous, as Launcher.removeTree is). `engine` gives the CLI's environment for
 * a marker's node (undefined: the launcher's own daemon). An image Docker cannot remove yet is left to the
 * next removal of the same tag (none): it is reported, never silently kept.
 */
export function removeLayersAndTree(
  docker: string,
  path: string,
  engine: (layer: LayerRef) => NodeJS.ProcessEnv | undefined = () => undefined,
  onError: (message: string) => void = () => {},
): void {
  if (existsSync(path)) {
    for (const layer of markersUnder(path)) {
      try {
        execFileSync(docker, ["rmi", layer.image], { stdio: ["ignore", "ignore", "pipe"], timeout: 60_000, env: engine(layer) ?? process.env });
      } catch (err) {
        const stderr = String((err as { stderr?: Buffer }).stderr ?? "").trim();
        if (!/No such image/i.test(stderr)) onError(`cannot remove the sandbox's files image ${layer.image}: ${stderr || (err as Error).message}`);
      }
    }
  }
  rmSync(path, { recursive: true, force: true });
}

/** `cp -a` of a directory (`target` must not exist; an absent source gives an empty one), the marker left out. */
function copyFiles(source: string, target: string): Promise<void> {
  if (!existsSync(source)) {
    mkdirSync(target, { recursive: true });
    return Promise.resolve();
  }
  mkdirSync(dirname(target), { recursive: true });
  return new Promise((resolve, reject) => {
    execFile("cp", ["-a", "-T", "--", source, target], { timeout: 30 * 60_000, maxBuffer: 1 << 20 }, (err, _out, stderr) => {
      if (err) return reject(new Error(`could not copy ${source}: ${String(stderr).trim() || err.message}`));
      rmSync(join(target, LAYER_MARKER), { force: true });
      resolve();
    });
  });
}

/**
 * Launcher.copyTree for a sandbox's root: whatever plain files it holds, and its files in Docker as an image of the
 * copy's own: the running container committed (`live`; docker pauses it while its layer is read), else the
 * stopped sandbox's layer tagged again. A root with neither (never started under Docker) is only its files.
 */
export async function copyLayer(
  run: EngineRun,
  source: string,
  target: string,
  live?: { container: string; base: string; node?: string },
  options: { skipLayer?: boolean } = {},
): Promise<void> {
  await copyFiles(source, target);
  if (options.skipLayer) return;
  if (live) {
    const tag = newFilesTag();
    const committed = await run(["commit", live.container, tag], 600_000);
    if (committed.code !== 0) throw new Error(`docker commit of ${live.container} failed: ${committed.stderr.trim().slice(-300)}`);
    writeLayer(target, { image: tag, base: live.base, ...(live.node ? { node: live.node } : {}) });
    return;
  }
  const layer = readLayer(source);
  if (layer) writeLayer(target, await tagLayer(run, layer));
}
