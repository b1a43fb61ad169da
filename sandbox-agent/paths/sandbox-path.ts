import { mkdirSync, promises as fsp, realpathSync } from "node:fs";
import { basename, dirname, join, posix } from "node:path";
import { errors, isErrno } from "../../src/errors.js";

/**
 * Maps sandbox paths (what clients send and see: absolute, normalized) to host
 * paths confined under the agent's --root. Every symlink on the way is resolved
 * the way the kernel would resolve it (absolute targets are host paths), and a
 * result outside the root is refused with 403 before anything is opened.
 *
 * Known limit: a process inside the sandbox can still swap a directory for a
 * symlink between this check and the open (TOCTOU); Node has no openat2
 * (RESOLVE_BENEATH). The workload is the sandbox's own, so this only lets it
 * reach what it could already reach itself.
 */
export class SandboxPaths {
  /** The root with its own symlinks resolved, so prefix checks compare like with like. */
  readonly hostRoot: string;

  constructor(root: string) {
    mkdirSync(root, { recursive: true });
    this.hostRoot = realpathSync(root);
  }

  /**
   * Normalizes a client path to an absolute sandbox path. `..` may not climb
   * above `/`; NUL bytes are refused; repeated and trailing slashes collapse.
   */
  normalize(raw: string, field = "path"): string {
    if (raw.includes("\0")) throw errors.badRequest(`${field}: must not contain NUL bytes`);
    const segments: string[] = [];
    for (const segment of raw.split("/")) {
      if (segment === "" || segment === ".") continue;
      if (segment === "..") {
        if (segments.length === 0) throw errors.forbidden(`${field}: ${raw} escapes the sandbox root`);
        segments.pop();
      } else segments.push(segment);
    }
    return `/${segments.join("/")}`;
  }

  /** The host path of a sandbox path, without resolving symlinks. */
  lexicalHostPath(sandboxPath: string): string {
    return sandboxPath === "/" ? this.hostRoot : join(this.hostRoot, sandboxPath);
  }

  /** The sandbox path of a host path inside the root (for echoing back). */
  toSandboxPath(hostPath: string): string {
    if (hostPath === this.hostRoot) return "/";
    const rel = hostPath.slice(this.hostRoot === "/" ? 0 : this.hostRoot.length);
    return posix.normalize(rel.startsWith("/") ? rel : `/${rel}`);
  }

  isInside(hostPath: string): boolean {
    if (this.hostRoot === "/") return true;
    return hostPath === this.hostRoot || hostPath.startsWith(`${this.hostRoot}/`);
  }

  /**
   * Resolves every symlink (the final component too) and checks the result is
   * inside the root. Components that do not exist yet are kept as they are.
   */
  async resolve(sandboxPath: string): Promise<string> {
    const real = await realpathAllowMissing(this.lexicalHostPath(sandboxPath), 0);
    if (!this.isInside(real)) throw errors.forbidden(`${sandboxPath} resolves outside the sandbox root`);
    return real;
  }

  /**
   * Resolves the parent only: the final component is the entry itself, even
   * if it is a symlink (delete removes the link, not its target).
   */
  async resolveParent(sandboxPath: string): Promise<string> {
    if (sandboxPath === "/") return this.hostRoot;
    const parent = await this.resolve(posix.dirname(sandboxPath));
    return join(parent, posix.basename(sandboxPath));
  }
}

const MAX_LINKS = 40; // Linux's MAXSYMLINKS

async function realpathAllowMissing(path: string, depth: number): Promise<string> {
  if (depth > MAX_LINKS) throw errors.forbidden(`too many levels of symbolic links`);
  try {
    return await fsp.realpath(path);
  } catch (err) {
    if (!isErrno(err, "ENOENT")) {
      if (isErrno(err, "ELOOP")) throw errors.forbidden(`too many levels of symbolic links`);
      if (isErrno(err, "ENOTDIR", "EACCES")) return path; // the open that follows reports it precisely
      throw err;
    }
  }
  // Something on the way is missing. A dangling symlink is followed by hand,
  // because a write through it would create its target.
  const stat = await fsp.lstat(path).catch(() => undefined);
  const parent = dirname(path);
  const realParent = parent === path ? parent : await realpathAllowMissing(parent, depth);
  if (stat?.isSymbolicLink()) {
    const target = await fsp.readlink(path);
    return realpathAllowMissing(target.startsWith("/") ? target : join(realParent, target), depth + 1);
  }
  return join(realParent, basename(path));
}
