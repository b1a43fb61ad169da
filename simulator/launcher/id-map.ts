import { execFile, spawnSync } from "node:child_process";
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";

/**
 * Every user id in a sandbox, the way rootless container engines do it: the
 * sandbox's user namespace maps its uid 0 to the simulator's own uid (so the
 * image's and the volumes' files, owned by the simulator's user, are root's
 * inside) and its uids 1..N to a block of subordinate ids from /etc/subuid
 * (gids from /etc/subgid), written by shadow's setuid newuidmap/newgidmap
 * (util-linux unshare --map-users/--map-groups calls them). Without such a
 * block a sandbox has one id, as before.
 */

export interface IdRange {
  /** First host id of the block. */
  start: number;
  count: number;
}

export type IdMapping = { kind: "range"; uid: IdRange; gid: IdRange; source: string } | { kind: "single"; reason: string };

/** The size of a block: ids 0..65536 inside, `nobody` (65534) included, as a machine has. */
export const RANGE_SIZE = 65536;
/** Below this, host ids belong to the host's own users and groups (login.defs SUB_UID_MIN). */
const FIRST_SUBORDINATE = 100_000;

export interface SubordinateEntry {
  owner: string;
  start: number;
  count: number;
}

/** /etc/subuid and /etc/subgid lines: `owner:start:count` (owner a name or a uid). */
export function parseSubordinateIds(text: string): SubordinateEntry[] {
  const entries: SubordinateEntry[] = [];
  for (const line of text.split("\n")) {
    const m = /^([^:#\s][^:]*):(\d+):(\d+)\s*$/.exec(line.trim());
    if (m && Number(m[3]) > 0) entries.push({ owner: m[1]!, start: Number(m[2]), count: Number(m[3]) });
  }
  return entries;
}

/** The owner's first block (by name or uid), at most RANGE_SIZE ids of it. */
export function firstRangeOf(entries: readonly SubordinateEntry[], user: { name: string; uid: number }): IdRange | undefined {
  const found = entries.find((e) => e.owner === user.name || e.owner === String(user.uid));
  return found && { start: found.start, count: Math.min(found.count, RANGE_SIZE) };
}

/** Whether [start, start+count) lies inside one of the owner's blocks. */
export function covered(entries: readonly SubordinateEntry[], owners: readonly string[], range: IdRange): boolean {
  return entries.some((e) => owners.includes(e.owner) && e.start <= range.start && range.start + range.count <= e.start + e.count);
}

/** Where a new block can start: past every block either file hands out, on a RANGE_SIZE boundary. */
export function freeStart(entries: readonly SubordinateEntry[]): number {
  const end = Math.max(FIRST_SUBORDINATE, ...entries.map((e) => e.start + e.count));
  return Math.ceil(end / RANGE_SIZE) * RANGE_SIZE;
}

export interface IdFiles {
  subuid: string;
  subgid: string;
  /** Which simulator holds which of root's blocks: one lease file per block. */
  leases: string;
}

export const SYSTEM_ID_FILES: IdFiles = { subuid: "/etc/subuid", subgid: "/etc/subgid", leases: "/var/lib/sandbox-kit/id-ranges" };

interface Lease {
  /** The simulator's sandboxes directory; none for a launcher used on its own (then the pid alone holds it). */
  owner?: string;
  pid: number;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function read(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** One allocation at a time across simulators: an exclusive lock file naming its holder (taken over once that holder is dead). */
function withLock<T>(dir: string, fn: () => T): T {
  const lock = join(dir, ".lock");
  for (let tries = 0; ; tries++) {
    try {
      const fd = openSync(lock, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const holder = Number(read(lock).trim());
      if (!holder || !alive(holder) || tries > 200) rmSync(lock, { force: true });
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 25);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

/**
 * As root: a block of root's subordinate ids that belongs to this simulator
 * alone — the one its sandboxes directory held before (its sandboxes' files
 * keep their owners across restarts), else one whose simulator is gone (its
 * directory removed, its process dead), else a new one added to /etc/subuid
 * and /etc/subgid past every block already handed out (to users by useradd,
 * to other simulators). Two simulators, or a sandbox and a host user, never
 * share an id.
 */
export function rootRange(owner: string | undefined, files: IdFiles = SYSTEM_ID_FILES): IdRange {
  mkdirSync(files.leases, { recursive: true, mode: 0o755 });
  return withLock(files.leases, () => {
    const leases = readdirSync(files.leases)
      .filter((n) => /^\d+$/.test(n))
      .map((n) => {
        let lease: Lease | undefined;
        try {
          lease = JSON.parse(read(join(files.leases, n))) as Lease;
        } catch {
          lease = undefined;
        }
        return { start: Number(n), lease };
      });
    const mine = owner !== undefined ? leases.find((l) => l.lease?.owner === owner) : undefined;
    const gone = leases.find((l) => !l.lease || ((l.lease.owner === undefined || !existsSync(l.lease.owner)) && !alive(l.lease.pid)));
    const entries = [...parseSubordinateIds(read(files.subuid)), ...parseSubordinateIds(read(files.subgid))];
    const start = (mine ?? gone)?.start ?? freeStart(entries);
    const range = { start, count: RANGE_SIZE };
    for (const file of [files.subuid, files.subgid]) {
      const text = read(file);
      if (!covered(parseSubordinateIds(text), ["root", "0"], range))
        appendFileSync(file, `${text === "" || text.endsWith("\n") ? "" : "\n"}root:${start}:${RANGE_SIZE}\n`);
    }
    const tmp = join(files.leases, `.${start}.${process.pid}`);
    writeFileSync(tmp, JSON.stringify({ owner, pid: process.pid } satisfies Lease));
    renameSync(tmp, join(files.leases, String(start)));
    return range;
  });
}

export interface IdMappingOptions {
  /** The simulator's sandboxes directory (root's block follows it). */
  owner?: string;
  /** newuidmap and newgidmap (Debian's uidmap), when installed. */
  helpers: { newuidmap?: string; newgidmap?: string };
  files?: IdFiles;
  uid?: number;
  userName?: string;
}

/** The mapping sandboxes get here, or why they keep a single id. */
export function resolveIdMapping(options: IdMappingOptions): IdMapping {
  const files = options.files ?? SYSTEM_ID_FILES;
  if (!options.helpers.newuidmap || !options.helpers.newgidmap) {
    return { kind: "single", reason: "newuidmap/newgidmap are not installed (apt-get install -y uidmap)" };
  }
  const uid = options.uid ?? process.getuid!();
  if (uid === 0) {
    try {
      const range = rootRange(options.owner, files);
      return {
        kind: "range",
        uid: range,
        gid: range,
        source: `root's block ${range.start}-${range.start + range.count - 1} of ${files.subuid} and ${files.subgid}, this simulator's own`,
      };
    } catch (err) {
      return { kind: "single", reason: `could not reserve subordinate ids in ${files.subuid} and ${files.subgid}: ${(err as Error).message}` };
    }
  }
  const user = { name: options.userName ?? userInfo().username, uid };
  const uidRange = firstRangeOf(parseSubordinateIds(read(files.subuid)), user);
  const gidRange = firstRangeOf(parseSubordinateIds(read(files.subgid)), user);
  if (!uidRange || !gidRange) {
    const missing = [!uidRange && files.subuid, !gidRange && files.subgid].filter(Boolean).join(" and ");
    return {
      kind: "single",
      reason: `user ${user.name} has no subordinate ids in ${missing}; an administrator can add them: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 ${user.name}`,
    };
  }
  const count = Math.min(uidRange.count, gidRange.count);
  return {
    kind: "range",
    uid: { ...uidRange, count },
    gid: { ...gidRange, count },
    source: `${user.name}'s subordinate ids in ${files.subuid} and ${files.subgid}`,
  };
}

/** unshare(1) options that create the sandbox's user namespace with this mapping. */
export function unshareIdArgs(mapping: IdMapping): string[] {
  const base = ["--user", "--map-root-user"];
  if (mapping.kind === "single") return base;
  return [...base, `--map-users=${mapping.uid.start},1,${mapping.uid.count}`, `--map-groups=${mapping.gid.start},1,${mapping.gid.count}`];
}

/**
 * rm -rf of a directory sandboxes wrote into. As a normal user with a block
 * of subordinate ids, files a sandbox's other users made are owned by ids the
 * simulator's user cannot remove: the removal then runs in a user namespace
 * with the sandboxes' mapping, where it is root over all of them (as
 * `podman unshare rm -rf`).
 */
export function removeMappedTree(path: string, mapping: IdMapping, unshare: string): void {
  try {
    rmSync(path, { recursive: true, force: true });
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (mapping.kind === "single" || (code !== "EACCES" && code !== "EPERM")) throw err;
  }
  const result = spawnSync(unshare, [...unshareIdArgs(mapping), "rm", "-rf", "--", path], {
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
    timeout: 120_000,
  });
  if (result.status !== 0) throw new Error(`could not remove ${path}: ${(result.stderr || result.error?.message || "").trim()}`);
}

/**
 * `cp -a` of a directory sandboxes wrote into, run inside the sandboxes' id mapping: every file keeps its owner
 * (ids of the block too, which a normal user's simulator cannot set from outside), mode, times, links and the
 * overlay whiteouts of deleted image files (character devices 0/0). `target` must not exist.
 */
export function copyMappedTree(source: string, target: string, mapping: IdMapping, unshare: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      unshare,
      [...unshareIdArgs(mapping), "cp", "-a", "-T", "--", source, target],
      { timeout: 30 * 60_000, maxBuffer: 1 << 20 },
      (err, _out, stderr) => {
        if (err) reject(new Error(`could not copy ${source}: ${String(stderr).trim() || err.message}`));
        else resolve();
      },
    );
  });
}

/** One line for /health and the start-up log. */
export function describeIdMapping(mapping: IdMapping): string {
  if (mapping.kind === "single") return `one user id only (root; chown to other ids, useradd and su fail): ${mapping.reason}`;
  return `user ids 0-${mapping.uid.count} (0 = the simulator's user, 1-${mapping.uid.count} = host ids ${mapping.uid.start}-${mapping.uid.start + mapping.uid.count - 1}: ${mapping.source})`;
}
