import { createReadStream, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { posix } from "node:path";
import { Transform } from "node:stream";
import { applyLayer, entryComponents, resolveInRoot } from "./layer.js";
import type { Progress } from "./progress.js";
import { COMMON_PACKAGES, DEBIAN_SUITE, type Recipe } from "./recipes.js";
import { hasTool, runTool, ToolError } from "./tools.js";

/**
 * Builds a hub image: mmdebstrap writes a Debian root filesystem as a
 * tarball (in root mode as root, in unshare mode with the user's subordinate
 * ids otherwise), which is unpacked like any layer; then the recipe's steps
 * run on the host against that directory (files written, apps created with
 * the host's npm, as the hub Dockerfiles do with `RUN npx create-...`).
 */

export interface BuildTools {
  mmdebstrap: string;
  npm: string;
  /** Debian mirror (default: mmdebstrap's, deb.debian.org). */
  mirror?: string;
  /** npm's cache, shared by builds. */
  npmCache: string;
}

/** Why a recipe cannot be built here, or undefined. */
export async function recipeBuildUnavailable(tools: BuildTools): Promise<string | undefined> {
  if (!(await hasTool(tools.mmdebstrap))) return "mmdebstrap is not installed (apt-get install mmdebstrap)";
  if (process.getuid?.() !== 0 && !(await hasTool("newuidmap"))) return "building as a normal user needs mmdebstrap's unshare mode: apt-get install uidmap, and subordinate ids for the user in /etc/subuid and /etc/subgid";
  return undefined;
}

/** Counts bytes flowing through, for a progress bar over a file of known size. */
function counter(total: number, progress: Progress): Transform {
  let done = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, next) {
      done += chunk.length;
      progress.advance(done, total);
      next(null, chunk);
    },
  });
}

export async function buildRecipe(recipe: Recipe, rootfs: string, workDir: string, tools: BuildTools, progress: Progress): Promise<void> {
  const why = await recipeBuildUnavailable(tools);
  if (why) throw new ToolError(`cannot build blaxel/${recipe.name}: ${why}`);
  const tarball = posix.join(workDir, "debian.tar");
  const packages = [...new Set([...COMMON_PACKAGES, ...recipe.packages])];
  progress.phase(`building a Debian ${DEBIAN_SUITE} root filesystem with ${packages.length} packages (mmdebstrap)`);
  const args = [
    "--variant=apt",
    `--include=${packages.join(",")}`,
    process.getuid?.() === 0 ? "--mode=root" : "--mode=unshare",
    "--aptopt=Acquire::Retries \"3\"",
    // Manuals and translations are not what a sandbox runs; copyright files stay.
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    DEBIAN_SUITE,
    tarball,
    ...(tools.mirror ? [tools.mirror] : []),
  ];
  await runTool(tools.mmdebstrap, args, { onLine: (line) => line.startsWith("I: ") && progress.note(line.slice(3)), timeoutMs: 30 * 60_000 });
  progress.phase("unpacking the root filesystem");
  await applyLayer(rootfs, createReadStream(tarball).pipe(counter(statSync(tarball).size, progress)));
  rmSync(tarball, { force: true });
  mkdirSync(posix.join(rootfs, recipe.workingDir), { recursive: true });
  for (const step of recipe.steps) {
    if (step.kind === "file") {
      const parts = entryComponents(step.path);
      const name = parts.pop()!;
      writeFileSync(posix.join(resolveInRoot(rootfs, parts, true), name), step.content, { mode: step.mode ?? 0o644 });
      continue;
    }
    progress.phase(`${step.label} (npm ${step.args[0]})`);
    const cwd = resolveInRoot(rootfs, entryComponents(step.cwd), true);
    const env = { ...process.env, CI: "1", npm_config_cache: tools.npmCache, npm_config_update_notifier: "false", npm_config_yes: "true", npm_config_loglevel: "warn" };
    await runTool(tools.npm, step.args, { cwd, env, onLine: (line) => line.trim() && progress.note(line.trim().slice(0, 200)), timeoutMs: 20 * 60_000 });
  }
}
