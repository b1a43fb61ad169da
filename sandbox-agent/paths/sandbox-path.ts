import { closeSync, constants, fstatSync, mkdirSync, promises as fsp, realpathSync, statSync, type Stats } from "node:fs";
import { join, posix } from "node:path";
import { errors } from "../../src/errors.js";
import { OwnWrites } from "./own-writes.js";
import { fdPath, inodeKey, O_PATH, walkBeneath, type Beneath, type Walked, type WalkOptions } from "./beneath.js";
import { chooseConfinement, type Confinement, type ConfinementSetting } from "./confinement.js";
import { walkInRoot } from "./in-root.js";
import { openat2Sync, RawFd, resolveFlags, type Held } from "./openat2.js";

export { fdPath } from "./beneath.js";

/** A resolved sandbox path, pinned: valid inside `SandboxPaths.use` only. */
export interface Pinned {
  sandboxPath: string;
  /** `/proc/self/fd/N`: the directory holding the entry, held open. */
  dir: string;
  /** N of `dir` (to hand the directory to a child process). */
  dirFd: number;
  /** The entry's name in `dir` ("" for the root). */
  name: string;
  /** `${dir}/${name}`: create, rename or unlink here; never follow it (it may have been swapped since). */
  entryPath: string;
  /** `/proc/self/fd/M` of the entry itself when it exists: read, list, stat here. */
  pinned?: string;
  /** M of `pinned`. */
  pinnedFd?: number;
  /** lstat of the entry when it exists (after following links, if asked). */
  stat?: import("node:fs").Stats;
  /** Names below a missing directory (only without createParents). */
  missingBelow: string[];
  /** The host path (for logs, messages and tools that need a path string); not race-free. */
  hostPath(): Promise<string>;
  /**
   * The entry's path in the mount namespace its root lives in, as that namespace's mount table names it (the
   * drives compare the two): the host path for a root given by path; for a held root, the sandbox's own path.
   */
  namespacePath(): Promise<string>;
  /** Where a write registers its temp file's name, so watchers do not report it. */
  ownWrites: OwnWrites;
}

export interface SandboxPathsOptions {
  /** Directories the API may not reach, whatever the spelling (the agent's data dir, its drives dir). */
  hidden?: string[];
  ownWrites?: OwnWrites;
  /** "auto" (default): openat2 where the addon and kernel have it, else the descriptor walk. */
  confinement?: ConfinementSetting;
}

/**
 * A root given as a descriptor (an agent host passes `/proc/<pid1>/root` opened O_PATH|O_DIRECTORY):
 * always kernel-confined (openat2). `label` is what logs and `hostRoot` show. The caller keeps
 * ownership of the descriptor (SandboxPaths.close leaves it open).
 */
export interface RootDescriptor {
  fd: number;
  label: string;
  /** The mount table of the namespace the root is in (`/proc/<pid1>/mountinfo`): where drives look for their mounts. */
  mountinfo?: string;
}

/**
 * Maps sandbox paths (what clients send and see: absolute, normalized) to
 * files confined under the agent's --root. Resolution walks one component at
 * a time from a descriptor of the root (see beneath.ts): symlinks resolve as
 * the kernel would (absolute targets are host paths), a result outside the
 * root is refused with 403, and `use` hands the caller descriptors, so a
 * directory swapped for a symlink between check and use cannot lead out.
 * The agent's own state (data dir, drives dir) is refused (403) even when it
 * lies under the root.
 */
export class SandboxPaths {
  /** The root with its own symlinks resolved, so prefix checks compare like with like. */
  readonly hostRoot: string;
  /** The agent's own temp files in the sandbox (shared with the watches). */
  readonly ownWrites: OwnWrites;
  #confinement: Confinement;
  readonly #setting: ConfinementSetting;
  readonly #hidden: string[];
  readonly #hiddenKeys = new Set<string>();
  /** Host paths of the hidden directories (openat2 mode checks a resolved directory's path against them). */
  readonly #hiddenPaths: string[] = [];
  #root?: Promise<fsp.FileHandle>;
  #heldRoot?: Held;
  readonly #ownsRoot: boolean;
  /** The mount table where the paths `toSandboxPath` and `isInside` take are mount points. */
  readonly mountTable: string;

  constructor(root: string | RootDescriptor, options: SandboxPathsOptions = {}) {
    this.#hidden = options.hidden ?? [];
    this.ownWrites = options.ownWrites ?? new OwnWrites();
    if (typeof root === "string") {
      mkdirSync(root, { recursive: true });
      this.hostRoot = realpathSync(root);
      this.#setting = options.confinement ?? "auto";
      this.#confinement = chooseConfinement(this.#setting);
      this.#ownsRoot = true;
      this.mountTable = "/proc/self/mountinfo";
    } else {
      this.hostRoot = root.label;
      this.#setting = "openat2";
      this.#confinement = chooseConfinement("openat2");
      this.#heldRoot = { fd: root.fd, stat: () => new RawFd(root.fd).stat(), close: async () => undefined };
      this.#ownsRoot = false;
      this.mountTable = root.mountinfo ?? "/proc/self/mountinfo";
    }
  }

  /**
   * True when the root is a held descriptor (an agent host serving a sandbox from outside): no host path names
   * anything of the sandbox (the kernel's name of a descriptor there is the sandbox's own), so `resolve` and
   * Pinned.hostPath refuse, and every caller works through descriptors.
   */
  get rootHeld(): boolean {
    return this.#heldRoot !== undefined;
  }

  /**
   * mkdir -p of a sandbox path, each component created through its parent's confined descriptor (a component
   * swapped for a link between two steps is never followed: mkdir does not follow its final name).
   */
  async mkdirp(sandboxPath: string): Promise<void> {
    const segments = this.normalize(sandboxPath).split("/").filter(Boolean);
    for (let i = 1; i <= segments.length; i++) {
      await this.use(`/${segments.slice(0, i).join("/")}`, { follow: true }, async (p) => {
        if (p.stat?.isDirectory()) return;
        if (p.stat) throw errors.conflict(`${p.sandboxPath} exists and is not a directory`);
        await fsp.mkdir(p.entryPath).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== "EEXIST") throw err;
        });
      });
    }
  }

  /** How paths are confined here, and why (for /health and the start-up log). */
  get confinement(): Confinement {
    return this.#confinement;
  }

  /**
   * Something links into the root by host path (the symlink drive backend): openat2 would read such a
   * link as a sandbox path, so "auto" falls back to path-checks, saying why; a demanded openat2 (the
   * setting, or a root given as a descriptor) cannot honour it and throws.
   */
  requireHostLinks(reason: string): void {
    if (this.#confinement.mode !== "openat2") return;
    if (this.#setting === "openat2") throw new Error(`--confinement openat2: ${reason}`);
    this.#confinement = { mode: "path-checks", reason };
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

  /**
   * The sandbox path of a namespace path (Pinned.namespacePath) inside the root (for echoing back). Under a
   * held root, namespace paths are the sandbox's own: the root is `/` there.
   */
  toSandboxPath(hostPath: string): string {
    const root = this.#namespaceRoot;
    if (hostPath === root) return "/";
    const rel = hostPath.slice(root === "/" ? 0 : root.length);
    return posix.normalize(rel.startsWith("/") ? rel : `/${rel}`);
  }

  isInside(hostPath: string): boolean {
    const root = this.#namespaceRoot;
    if (root === "/") return true;
    return hostPath === root || hostPath.startsWith(`${root}/`);
  }

  get #namespaceRoot(): string {
    return this.rootHeld ? "/" : this.hostRoot;
  }

  /** Whether a stat (of something listed or walked over) is one of the agent's hidden directories. */
  isHidden(stat: { dev: number | bigint; ino: number | bigint }): boolean {
    this.#refreshHidden();
    return this.#hiddenKeys.has(inodeKey(stat));
  }

  /**
   * Resolves `sandboxPath` and runs `fn` with it pinned: `follow` follows a
   * final symlink (reads, writes through a link), otherwise the entry is the
   * link itself (delete). Descriptors are closed when `fn` settles.
   */
  async use<T>(sandboxPath: string, options: WalkOptions, fn: (p: Pinned) => Promise<T>): Promise<T> {
    const walked = await this.#walk(sandboxPath, options);
    try {
      return await fn(pinnedOf(sandboxPath, walked, this.ownWrites, this.#heldRoot?.fd));
    } finally {
      await walked.close();
    }
  }

  /**
   * Resolves every symlink (the final component too) and checks the result is
   * inside the root; returns the host path. Components that do not exist yet
   * are kept as they are. Prefer `use`: a path string can be swapped under you.
   */
  async resolve(sandboxPath: string): Promise<string> {
    return this.use(sandboxPath, { follow: true }, (p) => p.hostPath());
  }

  /**
   * Resolves the parent only: the final component is the entry itself, even
   * if it is a symlink (delete removes the link, not its target). Returns its
   * namespace path (Pinned.namespacePath: a mount point as the mount table says it).
   */
  async resolveParent(sandboxPath: string): Promise<string> {
    if (sandboxPath === "/") return this.rootHeld ? "/" : this.hostRoot;
    return this.use(sandboxPath, { follow: false }, (p) => p.namespacePath());
  }

  async #walk(sandboxPath: string, options: WalkOptions): Promise<Walked> {
    this.#refreshHidden();
    if (this.#confinement.mode === "openat2") {
      const root = this.#heldRoot ?? (await this.#openRoot());
      const hidden = this.#hiddenKeys.size > 0 ? (dir: Held, stat: Stats) => this.#isHiddenDir(dir, stat) : undefined;
      return walkInRoot({ root, hidden }, this.normalize(sandboxPath), options);
    }
    const beneath: Beneath = { root: await this.#openRoot(), hostRoot: this.hostRoot, hidden: this.#hiddenKeys };
    return walkBeneath(beneath, this.normalize(sandboxPath), options);
  }

  async #openRoot(): Promise<fsp.FileHandle> {
    this.#root ??= fsp.open(this.hostRoot, O_PATH | constants.O_DIRECTORY);
    return this.#root;
  }

  /** A hidden directory itself (by inode), or a directory below one (by its path: the kernel's name for the descriptor). */
  async #isHiddenDir(dir: Held, stat: Stats): Promise<boolean> {
    if (this.#hiddenKeys.has(inodeKey(stat))) return true;
    if (!stat.isDirectory()) return false;
    const at = await fsp.readlink(fdPath(dir)).catch(() => undefined);
    return at !== undefined && this.#hiddenPaths.some((hidden) => at.startsWith(`${hidden}/`));
  }

  /** Hidden directories may not exist yet at start-up (the drives dir is made on first mount). */
  #refreshHidden(): void {
    if (this.#hiddenKeys.size === this.#hidden.length) return;
    this.#hiddenKeys.clear();
    this.#hiddenPaths.length = 0;
    for (const dir of this.#hidden) {
      try {
        this.#hiddenKeys.add(inodeKey(statSync(dir)));
        this.#hiddenPaths.push(realpathSync(dir));
      } catch {
        // not there yet
      }
    }
  }

  /** Closes the root descriptor (tests; the agent keeps it for its lifetime). */
  async close(): Promise<void> {
    if (!this.#ownsRoot) return;
    const root = this.#root;
    this.#root = undefined;
    await (await root?.catch(() => undefined))?.close();
  }
}

function pinnedOf(sandboxPath: string, w: Walked, ownWrites: OwnWrites, heldRoot: number | undefined): Pinned {
  const dir = fdPath(w.parent);
  const named = async () => {
    const base = await fsp.readlink(w.entry ? fdPath(w.entry) : dir);
    return w.entry ? base : posix.join(base, w.name, ...w.missingBelow);
  };
  const entryPath = w.name === "" ? dir : `${dir}/${w.name}`;
  return {
    sandboxPath,
    dir,
    dirFd: w.parent.fd,
    name: w.name,
    entryPath,
    pinned: w.entry && fdPath(w.entry),
    pinnedFd: w.entry?.fd,
    stat: w.stat,
    missingBelow: w.missingBelow,
    ownWrites,
    async hostPath() {
      if (heldRoot !== undefined) throw new Error(`no host path names ${sandboxPath}: the sandbox is served from outside its root (use its descriptors)`);
      return named();
    },
    async namespacePath() {
      if (heldRoot === undefined) return named();
      // The kernel names a descriptor of another mount namespace by its path from that namespace's root: the
      // sandbox's own path. Taken only once it leads back, inside the root, to the very directory held.
      const held = w.entry && w.stat?.isDirectory() ? w.entry : w.parent;
      const path = await fsp.readlink(fdPath(held));
      if (!path.startsWith("/") || !sameDirectory(heldRoot, path, held.fd)) throw errors.conflict(`${sandboxPath} changed during the request; retry`);
      return held === w.entry ? path : posix.join(path, w.name, ...w.missingBelow);
    },
  };
}

/** Whether `path`, resolved inside the held root without following any link, is the directory `fd` holds. */
function sameDirectory(rootFd: number, path: string, fd: number): boolean {
  const flags = resolveFlags();
  let found: number;
  try {
    found = openat2Sync(rootFd, path, O_PATH, flags.IN_ROOT | flags.NO_SYMLINKS | flags.NO_MAGICLINKS);
  } catch {
    return false;
  }
  try {
    return inodeKey(fstatSync(found)) === inodeKey(fstatSync(fd));
  } finally {
    closeSync(found);
  }
}
