import { createReadStream, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { posix } from "node:path";
import { Transform } from "node:stream";
import { applyLayer, entryComponents, resolveInRoot } from "./layer.js";
import type { Progress } from "./progress.js";
import { fetchNodeRelease, installNodeRelease } from "./node-release.js";
import { COMMON_PACKAGES, COMMON_STEPS, DEBIAN_SUITE, type Recipe } from "./recipes.js";
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
  /** npm's cache, shared by builds (the user's own npm cache where it has one). */
  npmCache: string;
  /** Node.js's official binaries fetched from the npm registry, kept across builds (the store's node-releases/). */
  nodeCache: string;
  /** Debian packages of earlier builds, kept across builds (the store's apt-cache/). */
  aptCache?: string;
  /** The host's apt archives, read only (HOST_APT_ARCHIVES where it exists). */
  hostAptArchives?: string;
  /** Ends the build's tools (a simulator that stops while its start-up build runs). */
  signal?: AbortSignal;
}

/** Why a recipe cannot be built here, or undefined. */
export async function recipeBuildUnavailable(tools: Pick<BuildTools, "mmdebstrap"> & Partial<BuildTools>): Promise<string | undefined> {
  if (!(await hasTool(tools.mmdebstrap))) return "mmdebstrap is not installed (apt-get install mmdebstrap)";
  if (process.getuid?.() !== 0 && !(await hasTool("newuidmap")))
    return "building as a normal user needs mmdebstrap's unshare mode: apt-get install uidmap, and subordinate ids for the user in /etc/subuid and /etc/subgid";
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

/** mmdebstrap's hook directory that runs dpkg under eatmydata (no fsync per file: most of a cold build's install time). */
const EATMYDATA_HOOKS = "/usr/share/mmdebstrap/hooks/eatmydata";
/** Where an apt-based host keeps the packages it downloaded: reused when its files are the image's versions (a trixie host). */
export const HOST_APT_ARCHIVES = "/var/cache/apt/archives";
/** Manuals and translations are not what a sandbox runs; copyright files stay. */
const NO_DOCS = [
  "path-exclude=/usr/share/man/*",
  "path-exclude=/usr/share/locale/*",
  "path-exclude=/usr/share/doc/*",
  "path-include=/usr/share/doc/*/copyright",
];
const NO_DOCS_FILE = "/etc/dpkg/dpkg.cfg.d/99sandbox-kit-nodoc";

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The hooks that make a build cheaper without changing what it makes:
 *  - the packages of earlier builds (the store's apt cache) and the host's own
 *    apt archives are hard-linked into the chroot's cache before anything is
 *    downloaded (apt takes a file whose name and size match the version it
 *    wants; others are ignored), and what this build downloaded is linked back
 *    into the store's cache (copied when another filesystem);
 *  - documentation is left out by a dpkg path-exclude file instead of
 *    --dpkgopt, which made mmdebstrap pipe every essential package through its
 *    Python tar filter (a third of a cold build); what the extract step
 *    unpacked before dpkg ran is removed at the end.
 */
export function buildHooks(aptCache: string | undefined, hostArchives: string | undefined): string[] {
  const hooks: string[] = [];
  const archives = `"$1"/var/cache/apt/archives`;
  const debsOf = (dir: string, cp: string) => `find ${quote(dir)} -maxdepth 1 -name '*.deb' -type f -exec ${cp} -t ${archives} {} +`;
  if (aptCache) mkdirSync(aptCache, { recursive: true });
  const linkIn = [`mkdir -p ${archives}`];
  // Hard links: nothing is copied on one filesystem; the store's cache is copied from another, the host's is not.
  if (aptCache) linkIn.push(`{ ${debsOf(aptCache, "cp -fl")} 2>/dev/null || ${debsOf(aptCache, "cp -f")}; }`);
  if (hostArchives && existsSync(hostArchives)) linkIn.push(`{ ${debsOf(hostArchives, "cp -fl")} 2>/dev/null; true; }`);
  hooks.push(`--setup-hook=${linkIn.join(" && ")}`);
  hooks.push(`--setup-hook=mkdir -p "$1"/etc/dpkg/dpkg.cfg.d && printf '%s\\n' ${NO_DOCS.map(quote).join(" ")} > "$1"${NO_DOCS_FILE}`);
  if (aptCache) {
    const notHosts = hostArchives ? ` && [ ! -e ${quote(hostArchives)}/"$n" ]` : "";
    hooks.push(
      `--customize-hook=for f in ${archives}/*.deb; do n=\${f##*/}; if [ -f "$f" ] && [ ! -e ${quote(aptCache)}/"$n" ]${notHosts}; then cp -l "$f" ${quote(aptCache)}/ 2>/dev/null || cp "$f" ${quote(aptCache)}/; fi; done; true`,
    );
  }
  hooks.push(
    `--customize-hook=rm -f "$1"${NO_DOCS_FILE} && rm -rf "$1"/usr/share/man/* "$1"/usr/share/locale/* && find "$1"/usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete && find "$1"/usr/share/doc -mindepth 1 -type d -empty -delete; true`,
  );
  return hooks;
}

export async function buildRecipe(recipe: Recipe, rootfs: string, workDir: string, tools: BuildTools, progress: Progress): Promise<void> {
  const why = await recipeBuildUnavailable(tools);
  if (why) throw new ToolError(`cannot build blaxel/${recipe.name}: ${why}`);
  const asRoot = process.getuid?.() === 0;
  // As root, mmdebstrap writes the directory in place (owners right, nothing to unpack); in unshare mode
  // a directory would carry the subordinate ids, so it writes a tarball, unpacked like any layer.
  const target = asRoot ? rootfs : posix.join(workDir, "debian.tar");
  const hostNpm = await hasTool(tools.npm);
  const fallbacks = hostNpm ? [] : recipe.steps.flatMap((s) => (s.kind === "npm-global" || s.kind === "node-release" ? [s.debianFallback] : []));
  const packages = [...new Set([...(recipe.basePackages ?? COMMON_PACKAGES), ...recipe.packages, ...fallbacks])];
  const suite = recipe.suite ?? DEBIAN_SUITE;
  progress.phase(`building a Debian ${suite} root filesystem with ${packages.length} packages (mmdebstrap)`);
  const args = [
    "--variant=apt",
    `--include=${packages.join(",")}`,
    asRoot ? "--mode=root" : "--mode=unshare",
    ...(asRoot ? ["--format=directory"] : ["--format=tar"]),
    '--aptopt=Acquire::Retries "3"',
    ...(existsSync(EATMYDATA_HOOKS) ? [`--hook-dir=${EATMYDATA_HOOKS}`] : []),
    // The essential packages stay in the chroot's cache until the customize hook has kept them.
    "--skip=essential/unlink",
    ...buildHooks(tools.aptCache, tools.hostAptArchives),
    suite,
    target,
    ...(tools.mirror ? [tools.mirror] : []),
  ];
  const started = Date.now();
  await runTool(tools.mmdebstrap, args, {
    onLine: (line) =>
      line.startsWith("I: ") && progress.note(`${line.slice(3).replace(/^(running --[a-z]+-hook).*/, "$1")} (${((Date.now() - started) / 1000).toFixed(1)} s)`),
    timeoutMs: 30 * 60_000,
    signal: tools.signal,
  });
  if (asRoot) {
    await ownAllByRoot(rootfs, tools.signal);
    return finishSteps(recipe, rootfs, tools, hostNpm, progress);
  }
  progress.phase("unpacking the root filesystem");
  await applyLayer(rootfs, createReadStream(target).pipe(counter(statSync(target).size, progress)));
  rmSync(target, { force: true });
  return finishSteps(recipe, rootfs, tools, hostNpm, progress);
}

/**
 * Gives root every file a root build left to another id (/etc/shadow and /etc/gshadow of group shadow, apt's
 * _apt directories, /var/mail), as a normal user's build has them (its tarball is unpacked as that user). The
 * store is shared, so a sandbox's user namespace sees such an id unmapped: useradd or groupadd then cannot
 * rewrite /etc/gshadow (EOVERFLOW on the overlay's copy-up) where the platform's root can.
 */
async function ownAllByRoot(rootfs: string, signal?: AbortSignal): Promise<void> {
  await runTool("find", [rootfs, "-xdev", "(", "!", "-uid", "0", "-o", "!", "-gid", "0", ")", "-exec", "chown", "-h", "0:0", "{}", "+"], {
    timeoutMs: 10 * 60_000,
    signal,
  });
}

/** The recipe's own steps, on the host against the unpacked root filesystem. */
async function finishSteps(recipe: Recipe, rootfs: string, tools: BuildTools, hostNpm: boolean, progress: Progress): Promise<void> {
  mkdirSync(posix.join(rootfs, recipe.workingDir), { recursive: true });
  const env = {
    ...process.env,
    CI: "1",
    npm_config_cache: tools.npmCache,
    npm_config_update_notifier: "false",
    npm_config_yes: "true",
    npm_config_loglevel: "warn",
    npm_config_audit: "false",
    npm_config_fund: "false",
  };
  const npm = (args: string[], cwd: string) =>
    runTool(tools.npm, args, {
      cwd,
      env,
      onLine: (line) => line.trim() && progress.note(line.trim().slice(0, 200)),
      timeoutMs: 20 * 60_000,
      signal: tools.signal,
    });
  for (const step of [...COMMON_STEPS, ...recipe.steps]) {
    if (step.kind === "file") {
      const parts = entryComponents(step.path);
      const name = parts.pop()!;
      writeFileSync(posix.join(resolveInRoot(rootfs, parts, true), name), step.content, { mode: step.mode ?? 0o644 });
      continue;
    }
    if (step.kind === "node-release") {
      if (!hostNpm) {
        progress.note(`Debian's nodejs instead of Node.js ${step.major}: no npm on this host to fetch it from the npm registry with`);
        continue;
      }
      progress.phase(`installing Node.js ${step.major} (the official binary, from the npm registry)`);
      const release = await fetchNodeRelease(step.major, {
        cacheDir: tools.nodeCache,
        npm: tools.npm,
        npmCache: tools.npmCache,
        signal: tools.signal,
        onNote: (line) => progress.note(line),
      });
      await installNodeRelease(release, rootfs, "/usr/local", tools.signal);
      progress.note(`Node.js ${release.version} in /usr/local/bin/node (${release.integrity.slice(0, 20)}...)`);
      continue;
    }
    if (step.kind === "npm-global") {
      if (!hostNpm) continue; // Debian's package was installed instead
      progress.phase(`${step.label} (${step.packages.join(" ")} from the npm registry)`);
      // --prefix <rootfs>/usr: /usr/lib/node_modules/<name>, bin links relative to it (/usr/bin/npm, npx).
      await npm(["install", "--global", "--prefix", posix.join(rootfs, "usr"), ...step.packages], rootfs);
      continue;
    }
    progress.phase(`${step.label} (npm ${step.args[0]})`);
    await npm(step.args, resolveInRoot(rootfs, entryComponents(step.cwd), true));
  }
}
