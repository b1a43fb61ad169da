import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { formatImageRef, parseImageRef, storeKey } from "./image-ref.js";
import { alive } from "./lock.js";
import { releaseMounts } from "./mounts.js";
import type { Progress } from "./progress.js";
import { hexOf, writeAtomic, type ImageManifest, type StoredImage } from "./store-records.js";
import { runTool } from "./tools.js";

/**
 * The image store's files (layout: image-store.ts): reading which image a name points at and what an image is
 * made of (its manifest, its layers, the names pointing at it), and the few writes every way of making an image
 * shares: a name pointed at a digest, a work dir renamed into place as a complete image, an image removed.
 * ImageStore adds where images come from (locate, ensure, import, build) on top.
 */
export class ImageFiles {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
    for (const sub of ["images", "refs", "tmp", "locks"]) mkdirSync(join(this.dir, sub), { recursive: true });
    this.removeAbandonedWork();
  }

  /** Work dirs are named <kind>-<pid>-<random>: those of a process that died mid-build are removed. */
  protected removeAbandonedWork(): void {
    for (const name of readdirSync(join(this.dir, "tmp"))) {
      const pid = Number(/^[a-z]+-(\d+)-/.exec(name)?.[1]);
      if (pid && pid !== process.pid && !alive(pid) && releaseMounts(join(this.dir, "tmp", name)))
        rmSync(join(this.dir, "tmp", name), { recursive: true, force: true });
    }
  }

  /** A new work dir under tmp/, named for this process. */
  protected workDir(kind: string): string {
    return join(this.dir, "tmp", `${kind}-${process.pid}-${randomBytes(6).toString("hex")}`);
  }

  /** Every name in the store with its image. */
  list(): StoredImage[] {
    const out: StoredImage[] = [];
    for (const file of readdirSync(join(this.dir, "refs"))
      .filter((f) => f.endsWith(".json"))
      .sort()) {
      const image = this.readRef(join(this.dir, "refs", file));
      if (image) out.push(image);
    }
    return out;
  }

  /** The stored image a name points at (exactly that name), if any. */
  get(name: string): StoredImage | undefined {
    return this.readRef(this.refPath(formatImageRef(parseImageRef(name))));
  }

  /** The images (digest hex) a name points at, and every image those are stacked on (a template's base keeps its files). */
  protected inUse(): Set<string> {
    const used = new Set<string>();
    for (const image of this.list()) {
      for (let digest: string | undefined = image.manifest.digest; digest && !used.has(hexOf(digest)); digest = this.manifestOf(digest)?.base)
        used.add(hexOf(digest));
    }
    return used;
  }

  protected manifestOf(digest: string): ImageManifest | undefined {
    try {
      return JSON.parse(readFileSync(join(this.imageDir(digest), "manifest.json"), "utf8")) as ImageManifest;
    } catch {
      return undefined;
    }
  }

  /** The root directories of an image, top first (its base's below its own); undefined when one is missing. */
  protected layersOf(digest: string, manifest: ImageManifest | undefined = this.manifestOf(digest), depth = 0): string[] | undefined {
    if (!manifest || depth > 64) return undefined;
    const own = join(this.imageDir(digest), "rootfs");
    if (!manifest.base) return [own];
    const below = this.layersOf(manifest.base, undefined, depth + 1);
    return below && [own, ...below];
  }

  protected refPath(canonical: string): string {
    return join(this.dir, "refs", `${storeKey(canonical)}.json`);
  }

  protected imageDir(digest: string): string {
    return join(this.dir, "images", hexOf(digest));
  }

  protected hasImage(digest: string): boolean {
    return existsSync(join(this.imageDir(digest), "manifest.json"));
  }

  protected readRef(path: string): StoredImage | undefined {
    let ref: { ref: string; digest: string };
    try {
      ref = JSON.parse(readFileSync(path, "utf8")) as typeof ref;
    } catch {
      return undefined;
    }
    const manifest = this.manifestOf(ref.digest);
    const layers = this.layersOf(ref.digest, manifest);
    if (!manifest || !layers) return undefined; // the image (or the base it is stacked on) was removed under its name
    return { ref: ref.ref, rootfs: layers[0]!, layers, manifest: { ...manifest, refs: this.refsOf(ref.digest) } };
  }

  protected refsOf(digest: string): string[] {
    const out: string[] = [];
    for (const file of readdirSync(join(this.dir, "refs")).filter((f) => f.endsWith(".json"))) {
      try {
        const ref = JSON.parse(readFileSync(join(this.dir, "refs", file), "utf8")) as { ref: string; digest: string };
        if (ref.digest === digest) out.push(ref.ref);
      } catch {
        /* being replaced */
      }
    }
    return out.sort();
  }

  protected point(canonical: string, digest: string): StoredImage {
    writeAtomic(this.refPath(canonical), JSON.stringify({ ref: canonical, digest }) + "\n");
    return this.readRef(this.refPath(canonical))!;
  }

  /** Builds into a temp dir, then renames it into place: a half-built image is never visible. */
  protected async install(
    digest: string,
    progress: Progress,
    populate: (rootfs: string) => Promise<Omit<ImageManifest, "refs" | "digest" | "size" | "created">>,
  ): Promise<void> {
    const work = this.workDir("build");
    mkdirSync(join(work, "rootfs"), { recursive: true });
    try {
      const described = await populate(join(work, "rootfs"));
      await this.finish(work, digest, described);
      progress.phase("done");
    } finally {
      // Async: a failed build's tree can be large. Left in place (and reported) if a mount under it stays.
      if (releaseMounts(work)) await rm(work, { recursive: true, force: true });
      else progress.note(`${work} left in place: something is still mounted under it`);
    }
  }

  /** `knownSize`: the builder's count (a template over its base), sparing a walk of the whole tree. */
  protected async finish(
    work: string,
    digest: string,
    described: Omit<ImageManifest, "refs" | "digest" | "size" | "created">,
    knownSize?: number,
  ): Promise<void> {
    const size = knownSize ?? (Number((await runTool("du", ["-sb", join(work, "rootfs")])).split("\t")[0]) || 0);
    const manifest: ImageManifest = { refs: [], ...described, digest, size, created: new Date().toISOString() };
    writeAtomic(join(work, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
    try {
      renameSync(work, this.imageDir(digest));
    } catch (err) {
      // Another process installed the same image first: keep theirs.
      if (!["EEXIST", "ENOTEMPTY"].includes((err as NodeJS.ErrnoException).code ?? "")) throw err;
    }
  }

  protected removeImageDir(digest: string): void {
    const dir = this.imageDir(digest);
    if (!existsSync(dir)) return;
    // Renamed away first: a reader never sees a half-removed image.
    const gone = this.workDir("removed");
    renameSync(dir, gone);
    rmSync(gone, { recursive: true, force: true });
  }
}
