import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, watch, type Dirent, type FSWatcher } from "node:fs";
import { posix } from "node:path";
import { O_PATH } from "../paths/beneath.js";

export type WatchOp = "CREATE" | "WRITE" | "REMOVE" | "RENAME" | "CHMOD";

/** One line of the stream, as the reference daemon writes it (fsnotify's op names). */
export interface WatchEvent {
  op: WatchOp;
  name: string;
  /** The sandbox path of the directory holding `name`. */
  path: string;
}

/** Counts the kernel watches the agent holds, so a test (or /health) can see that a dropped client freed its own. */
export class WatchRegistry {
  watches = 0;
  streams = 0;
}

export interface WatcherOptions {
  /**
   * The watched directory, held open (O_PATH), confined as every API path is; the watcher owns it.
   * Everything below is reached through descriptors (`/proc/self/fd/N/<name>`, never following a
   * final link), so a directory swapped for a symlink cannot point a watch outside the root.
   */
  dirFd: number;
  sandboxDir: string;
  recursive: boolean;
  /** True for a sandbox path whose events are dropped (and, for a directory, not watched at all). */
  ignored: (sandboxPath: string) => boolean;
  onEvent: (event: WatchEvent) => void;
  /** A failure that ends the watch (e.g. the inotify watch limit). */
  onError: (err: Error) => void;
  registry: WatchRegistry;
  /** The agent's own temp files (OwnWrites): never reported; the rename of one over a name is that name's write. */
  ownName?: (name: string) => boolean;
}

interface Watched {
  watcher: FSWatcher;
  /** The directory, held open (O_PATH): every look inside goes through `/proc/self/fd/<fd>`. */
  fd: number;
  sandbox: string;
  /** Names last seen in the directory: tells a create from a replace and a remove from a race. */
  names: Set<string>;
  /** What an earlier event saw of a file: a later change that moved only its mode is a CHMOD. */
  seen: Map<string, { mode: number; uid: number; gid: number; mtimeMs: number; size: number }>;
}

/**
 * Watches a directory (and, recursively, every directory below it) with one
 * inotify watch per directory through fs.watch; Node 20's own recursive mode
 * on Linux re-implements this in JS and has lost events, so the recursion is
 * done here. fs.watch says only "rename" or "change": the op is recovered
 * with an lstat — a name that appears is CREATE, one that disappears REMOVE,
 * unless a name appears right after it in the same batch of kernel events (a
 * move: RENAME for the old name, then CREATE for the new, as fsnotify
 * reports it); a change is WRITE, or CHMOD when only the mode or owner moved
 * since the file's last event (for a first event: when ctime is past mtime).
 * Looking after the fact has a limit: a file changed and gone before its
 * events are read reports WRITE for a chmod. Symlinked directories are never
 * followed.
 */
export class DirectoryWatcher {
  readonly #o: WatcherOptions;
  /** By sandbox path. */
  readonly #dirs = new Map<string, Watched>();
  #gone: WatchEvent[] = [];
  #flushQueued = false;
  #closed = false;

  constructor(options: WatcherOptions) {
    this.#o = options;
  }

  /** Watches the directory (and its subdirectories when recursive), yielding to the event loop between directories. */
  async start(): Promise<void> {
    const queue: [number, string][] = [[this.#o.dirFd, this.#o.sandboxDir]];
    let sinceYield = 0;
    while (queue.length > 0 && !this.#closed) {
      const [fd, sandbox] = queue.shift()!;
      const subdirs = this.#add(fd, sandbox);
      if (this.#o.recursive) queue.push(...subdirs);
      if (++sinceYield >= 64) {
        sinceYield = 0;
        await new Promise((r) => setImmediate(r));
      }
    }
  }

  get watchedDirectories(): number {
    return this.#dirs.size;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const entry of this.#dirs.values()) {
      entry.watcher.close();
      closeQuietly(entry.fd);
    }
    this.#o.registry.watches -= this.#dirs.size;
    if (!this.#dirs.has(this.#o.sandboxDir)) closeQuietly(this.#o.dirFd); // never watched (gone meanwhile)
    this.#dirs.clear();
  }

  /** Starts watching one directory (held open as `fd`, which it then owns); returns its subdirectories (fd, sandbox). Throws only for watch-limit failures. */
  #add(fd: number, sandbox: string): [number, string][] {
    if (this.#dirs.has(sandbox) || this.#closed) {
      closeQuietly(fd);
      return [];
    }
    const host = `/proc/self/fd/${fd}`;
    let watcher: FSWatcher;
    try {
      // inotify watches the inode the descriptor holds: no path is resolved again.
      watcher = watch(host, { persistent: false }, (type, filename) => {
        if (filename !== null) this.#onChange(sandbox, type, filename.toString());
      });
    } catch (err) {
      closeQuietly(fd);
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR" || code === "EACCES") return []; // gone or unreadable meanwhile
      this.#o.onError(
        code === "ENOSPC" ? new Error(`cannot watch ${sandbox}: the inotify watch limit is reached (fs.inotify.max_user_watches)`) : (err as Error),
      );
      return [];
    }
    watcher.on("error", () => this.#remove(sandbox));
    this.#o.registry.watches++;
    const entry: Watched = { watcher, fd, sandbox, names: new Set(), seen: new Map() };
    this.#dirs.set(sandbox, entry);
    const subdirs: [number, string][] = [];
    let listing: Dirent[] = [];
    try {
      listing = readdirSync(host, { withFileTypes: true });
    } catch {
      // unreadable: watched for events only
    }
    for (const d of listing) {
      entry.names.add(d.name);
      const childSandbox = posix.join(sandbox, d.name);
      if (!d.isDirectory() || this.#o.ignored(childSandbox)) continue;
      const child = openChildDir(fd, d.name);
      if (child !== undefined) subdirs.push([child, childSandbox]);
    }
    return subdirs;
  }

  /** Stops watching a directory and everything below it. */
  #remove(sandbox: string): void {
    const below = sandbox === "/" ? "/" : `${sandbox}/`;
    for (const [dir, entry] of this.#dirs) {
      if (dir === sandbox || dir.startsWith(below)) {
        entry.watcher.close();
        closeQuietly(entry.fd);
        this.#dirs.delete(dir);
        this.#o.registry.watches--;
      }
    }
  }

  #emit(event: WatchEvent): void {
    if (this.#closed || this.#o.ownName?.(event.name) || this.#o.ignored(posix.join(event.path, event.name))) return;
    this.#o.onEvent(event);
  }

  #flushGone(): void {
    const gone = this.#gone;
    this.#gone = [];
    for (const event of gone) this.#emit(event);
  }

  #onChange(dirSandbox: string, type: string, name: string): void {
    const entry = this.#dirs.get(dirSandbox);
    if (!entry || this.#closed) return;
    const full = `/proc/self/fd/${entry.fd}/${name}`;
    const fullSandbox = posix.join(dirSandbox, name);
    let stat: ReturnType<typeof lstatSync> | undefined;
    try {
      stat = lstatSync(full);
    } catch {
      stat = undefined;
    }
    const event = { name, path: entry.sandbox };
    const before = entry.seen.get(name);
    if (stat) entry.seen.set(name, { mode: stat.mode, uid: stat.uid, gid: stat.gid, mtimeMs: stat.mtimeMs, size: stat.size });
    else entry.seen.delete(name);
    if (type === "change") {
      this.#flushGone();
      if (!stat && !entry.names.has(name)) return;
      entry.names.add(name);
      // Looked at after the fact: a file already gone was still written to (or chmod-ed); say WRITE.
      let op: WatchOp = "WRITE";
      if (stat && before) {
        const attributesOnly = stat.mtimeMs === before.mtimeMs && stat.size === before.size;
        if (attributesOnly && (stat.mode !== before.mode || stat.uid !== before.uid || stat.gid !== before.gid)) op = "CHMOD";
      } else if (stat && stat.ctimeMs > stat.mtimeMs) op = "CHMOD";
      this.#emit({ ...event, op });
      return;
    }
    // "rename": something appeared, disappeared or was replaced under `name`.
    if (!stat && name === String(entry.fd) && !entry.names.has(name)) {
      // The watched directory itself went away (IN_DELETE_SELF; fs.watch names it by the watched path's basename).
      let removed = true;
      try {
        removed = fstatSync(entry.fd).nlink === 0;
      } catch {
        // closed: gone
      }
      if (removed) {
        this.#remove(dirSandbox);
        return;
      }
    }
    const known = entry.names.has(name);
    if (stat) {
      entry.names.add(name);
      // A name appearing right after one disappeared, in the same batch of events: a move.
      const moved = this.#gone.pop();
      this.#flushGone();
      if (moved && moved.path === entry.sandbox && this.#o.ownName?.(moved.name)) {
        // The agent's atomic write landing: reported as the reference's in-place write is (fsnotify
        // on os.WriteFile): WRITE for a file that was there, CREATE then WRITE for a new one.
        if (!known) this.#emit({ ...event, op: "CREATE" });
        if (known || stat.size > 0) this.#emit({ ...event, op: "WRITE" });
        return;
      }
      if (moved) this.#emit({ ...moved, op: "RENAME" });
      this.#emit({ ...event, op: "CREATE" });
      if (stat.isDirectory() && this.#o.recursive && !this.#o.ignored(posix.join(entry.sandbox, name))) {
        if (known && this.#dirs.has(fullSandbox)) this.#remove(fullSandbox); // replaced: watch the new directory
        const child = openChildDir(entry.fd, name);
        if (child !== undefined) this.#watchNew(child, fullSandbox);
      }
      return;
    }
    if (!known) {
      // Created (or moved in) and removed again before we looked: report its arrival; its REMOVE follows.
      entry.names.add(name);
      const moved = this.#gone.pop();
      this.#flushGone();
      if (moved) this.#emit({ ...moved, op: "RENAME" });
      this.#emit({ ...event, op: "CREATE" });
      return;
    }
    entry.names.delete(name);
    if (this.#dirs.has(fullSandbox)) this.#remove(fullSandbox);
    this.#gone.push({ ...event, op: "REMOVE" });
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      setImmediate(() => {
        this.#flushQueued = false;
        this.#flushGone();
      });
    }
  }

  /**
   * A directory created under a recursive watch: watched at once, and what
   * is already inside it (created before the watch was in place) reported as
   * CREATE events, recursively, as the reference does.
   */
  #watchNew(fd: number, sandbox: string): void {
    const queue: [number, string][] = [[fd, sandbox]];
    while (queue.length > 0 && !this.#closed) {
      const [dirFd, dirSandbox] = queue.shift()!;
      const subdirs = this.#add(dirFd, dirSandbox);
      const entry = this.#dirs.get(dirSandbox);
      for (const name of entry?.names ?? []) this.#emit({ op: "CREATE", name, path: dirSandbox });
      queue.push(...subdirs);
    }
  }
}

/** A subdirectory of a held directory, opened without following a link in its place (undefined: gone, or not a directory now). */
function openChildDir(parentFd: number, name: string): number | undefined {
  try {
    return openSync(`/proc/self/fd/${parentFd}/${name}`, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}
