import { promises as fsp } from "node:fs";
import { join } from "node:path";
import { ApiError, errors } from "../../src/errors.js";
import { checkDriveAccess } from "./access.js";
import { backendFor } from "./backends/index.js";
import type { DriveBackend, MountSpec } from "./backends/types.js";
import { DriveBusyError } from "./run.js";
import { KeyedLock } from "./keyed-lock.js";
import { prepareMountPoint, removeCreated } from "./mount-point.js";
import { readMountTable, topMountAt, type MountEntry } from "./mount-table.js";
import { detach, mountIdAt, mountOn, withMountTarget, type MountTarget } from "./pinned-mount.js";
import { driveAt, place, type Placed } from "./liveness.js";
import type { DriveRecord } from "./drive-store.js";
import { asMountPathError, realpathOrSelf, recordKey, specOf, type DriveMountInfo, type DriveServiceOptions, type MountRequest } from "./mount-api.js";
import { checkMountTarget, normalizeDrivePath, normalizeMountPath, overlaps, validateDriveName } from "./validate.js";

/** The service's shapes (mount-api.ts), importable from here as before. */
export type { DriveMountInfo, DriveServiceOptions, MountRequest } from "./mount-api.js";

/**
 * Mount, unmount and list drives. One lock per mount point (host path, so
 * two sandbox spellings of one directory share it) serialises mount and
 * unmount there; what is mounted always comes from the kernel's mount table
 * joined with the agent's records.
 */
export class DriveService {
  readonly backend: DriveBackend;
  readonly #o: DriveServiceOptions;
  readonly #lock = new KeyedLock();
  /** Host paths being mounted right now: they count for the nesting rule before their record exists. */
  readonly #inFlight = new Set<string>();
  readonly #readTable: () => Promise<MountEntry[]>;

  constructor(options: DriveServiceOptions) {
    this.#o = options;
    this.backend = options.backend;
    this.#readTable = options.readTable ?? (() => readMountTable(options.paths.mountTable));
  }

  async mount(request: MountRequest): Promise<DriveMountInfo & { success: true; message: string }> {
    const driveName = validateDriveName(request.driveName);
    const drivePath = normalizeDrivePath(request.drivePath);
    const mountPath = normalizeMountPath(request.mountPath);
    const readOnly = request.readOnly ?? false;
    if (readOnly && !this.backend.supportsReadOnly) throw errors.badRequest(`readOnly: the ${this.backend.name} drive backend cannot make a drive read-only`);
    const hostPath = await this.#hostPathOf(mountPath);
    const reply = (message: string, info: DriveMountInfo) => ({ success: true as const, message, ...info });
    if (this.#o.existingOnly && this.backend.name !== "command") {
      await this.#requireDrive(driveName);
      await checkDriveAccess(this.#o.drivesDir, this.#o.sandboxName ?? "", driveName, drivePath, readOnly);
    }

    return this.#lock.run(hostPath, async () => {
      const table = await this.#readTable();
      const placed = await this.#join(table);
      const here = driveAt(placed, hostPath, table);
      if (here) {
        const info = this.#info(here);
        if (here.record.driveName !== driveName || here.record.drivePath !== drivePath) {
          throw errors.conflict(
            `mountPath: ${mountPath} is already in use: drive ${here.record.driveName} (drivePath=${here.record.drivePath}) is mounted there`,
          );
        }
        if (info.readOnly !== readOnly) {
          throw errors.conflict(
            `mountPath: drive ${driveName} is already mounted at ${mountPath} with readOnly=${info.readOnly}; unmount it first to change that`,
          );
        }
        return reply("Drive already mounted", { ...info, mountPath });
      }
      if (placed.some((p) => p.state === "moved" && p.record.hostPath === hostPath)) {
        throw errors.conflict(
          `mountPath: the drive mounted at ${mountPath} was moved away with a parent directory; put the directory back, or unmount the drive first`,
        );
      }
      const stale = placed.filter((p) => p.state === "gone").map((p) => p.record);
      // Only this path's stale record: others are cleaned under their own lock.
      for (const record of stale) if (record.hostPath === hostPath) await this.#forget(record);
      // Synchronous from here to the reservation, and on fresh records (a mount
      // elsewhere may have finished during the awaits): nothing slips in between.
      const staleKeys = new Set(stale.map(recordKey));
      const managed = new Map(
        this.#o.store
          .all()
          .filter((r) => !staleKeys.has(recordKey(r)))
          .map((r) => [r.hostPath, r.sandboxPath]),
      );
      for (const other of [...managed.keys(), ...this.#inFlight]) {
        if (overlaps(hostPath, other)) {
          const shown = managed.get(other) ?? this.#o.paths.toSandboxPath(other);
          throw errors.badRequest(
            `mountPath: ${mountPath} is ${hostPath.length < other.length ? "above" : "inside"} ${shown}, where the agent already mounts a drive`,
          );
        }
      }
      const foreign = topMountAt(table, hostPath);
      if (foreign) throw errors.conflict(`mountPath: ${mountPath} is occupied by a ${foreign.fsType} mount the agent does not manage`);
      this.#inFlight.add(hostPath);
      try {
        const record = await this.#attach({ driveName, drivePath, readOnly, hostMountPath: hostPath }, mountPath);
        this.#o.logger.info({ driveName, drivePath, mountPath, readOnly, backend: record.backend }, "drive mounted");
        return reply("Drive mounted successfully", { driveName, mountPath, drivePath, readOnly, backend: record.backend });
      } finally {
        this.#inFlight.delete(hostPath);
      }
    });
  }

  /** With --drives-existing-only, drives are provisioned by a control plane: a missing one is an error, not created. */
  async #requireDrive(driveName: string): Promise<void> {
    const stat = await fsp.lstat(join(this.#o.drivesDir, driveName)).catch(() => undefined);
    if (!stat?.isDirectory())
      throw errors.notFound(`driveName: drive "${driveName}" does not exist; create the drive first (this agent mounts only provisioned drives)`);
  }

  async unmount(rawMountPath: string, force: boolean): Promise<{ success: true; message: string; mountPath: string }> {
    const mountPath = normalizeMountPath(rawMountPath);
    const hostPath = await this.#hostPathOf(mountPath);
    return this.#lock.run(hostPath, async () => {
      const table = await this.#readTable();
      const placed = await this.#join(table);
      // By where the path leads now, by where it led at the mount, or by the path as the list shows it (a link in it
      // changed since: the drive is still the one listed under that path, and unmounted where it is).
      const found =
        driveAt(placed, hostPath, table) ??
        placed.find((p) => p.record.hostPath === hostPath) ??
        placed.find((p) => p.state !== "gone" && p.record.sandboxPath === mountPath);
      // Moved with a parent directory: unmounted where it is now, if that is still inside the root.
      const now = found?.now !== undefined && this.#o.paths.isInside(found.now) ? found.now : undefined;
      if (!found || now === undefined) {
        if (found) await this.#forget(found.record);
        throw errors.notFound(`mountPath: no drive is mounted at ${mountPath}`);
      }
      const record = found.record;
      const backend = backendFor(record.backend, this.backend, this.#o.drivesDir, this.#o.programs);
      const [at, atHost] = now === hostPath ? [mountPath, hostPath] : [this.#o.paths.toSandboxPath(now), now];
      await withMountTarget(this.#o.paths, at, atHost, false, async (target) => {
        // The mount table says ours is on top of the path; the held mount point must lead to that very mount.
        if (record.mountId !== null && (await mountIdAt(target)) !== record.mountId)
          throw errors.conflict(`mountPath: ${mountPath} changed during the request; retry`);
        await backend.unmount({ ...specOf(record), target }, force);
      }).catch((e: unknown) => {
        if (e instanceof DriveBusyError) {
          throw errors.conflict(
            `mountPath: ${mountPath} is busy (${this.#scrub(e.message, atHost, at)}): a process has a file open or its working directory inside it; stop it, or retry with ?force=true for a lazy unmount`,
          );
        }
        throw this.#scrubError(asMountPathError(e, mountPath), atHost, at);
      });
      await this.#forget(record);
      this.#o.logger.info({ driveName: record.driveName, mountPath, lazy: force }, "drive unmounted");
      return { success: true as const, message: "Drive unmounted successfully", mountPath };
    });
  }

  async list(): Promise<DriveMountInfo[]> {
    const placed = await this.#join(await this.#readTable());
    return placed
      .filter((p) => p.now !== undefined && this.#o.paths.isInside(p.now))
      .map((p) => this.#info(p))
      .sort((a, b) => a.mountPath.localeCompare(b.mountPath));
  }

  /**
   * At start-up: keeps (adopts) every recorded drive still mounted — a
   * previous agent left them in place for the processes using them — and
   * forgets the ones that are gone.
   */
  async adopt(): Promise<{ adopted: number; forgotten: number }> {
    const placed = await this.#join(await this.#readTable());
    const stale = placed.filter((p) => p.state === "gone");
    for (const { record } of stale) await this.#forget(record);
    for (const { record: r, state } of placed)
      if (state !== "gone") this.#o.logger.info({ driveName: r.driveName, mountPath: r.sandboxPath, backend: r.backend }, "adopted drive mount");
    return { adopted: placed.length - stale.length, forgotten: stale.length };
  }

  /**
   * Prepares the mount point, attaches the drive on the held mount point and
   * records it. Whatever fails, nothing stays mounted and what was created
   * for the mount point is removed.
   */
  async #attach(spec: MountSpec, mountPath: string): Promise<DriveRecord> {
    const createdDir = await prepareMountPoint(this.#o.paths, mountPath, this.backend.mountPoint).catch((e: unknown) => {
      throw asMountPathError(e, mountPath);
    });
    const directory = this.backend.mountPoint === "directory";
    try {
      return await withMountTarget(this.#o.paths, mountPath, spec.hostMountPath, directory, async (target) => {
        const pinned = { ...spec, target };
        const mounted = await this.backend.mount(pinned);
        const entry = directory ? await this.#landed(target, mountPath) : undefined;
        const record: DriveRecord = {
          hostPath: spec.hostMountPath,
          sandboxPath: mountPath,
          driveName: spec.driveName,
          drivePath: spec.drivePath,
          readOnly: spec.readOnly,
          backend: this.backend.name,
          mountId: entry?.mountId ?? null,
          device: entry?.device ?? null,
          linkTarget: mounted.linkTarget ?? null,
          createdDir: createdDir ?? null,
          mountedAt: this.#o.clock.now(),
        };
        try {
          this.#o.store.put(record);
        } catch (e) {
          // Unrecorded, the mount would look foreign forever: undo it.
          await this.backend.unmount(pinned, true).catch(() => undefined);
          throw e;
        }
        return record;
      });
    } catch (e) {
      await removeCreated(this.#o.paths, spec.hostMountPath, createdDir);
      throw this.#scrubError(asMountPathError(e, mountPath), spec.hostMountPath, mountPath);
    }
  }

  /**
   * The mount the backend made on the held mount point. It must sit at the
   * checked host path: a mount point moved away before the mount (so the
   * mount went with it) is detached again and the request answered 409.
   */
  async #landed(target: MountTarget, mountPath: string): Promise<MountEntry> {
    const mounted = await mountOn(target.dirFd!, target.table);
    if (!mounted) throw errors.internal(`Failed to mount drive: ${mountPath} is not in the mount table after mounting`);
    try {
      if (mounted.entry.mountPoint === target.hostPath) return mounted.entry;
      await detach(mounted.root, this.#o.programs);
      throw errors.conflict(`mountPath: ${mountPath} was moved during the mount; the mount was undone, retry`);
    } finally {
      await mounted.root.close();
    }
  }

  /** Every record (but those being mounted right now) placed in the mount table. */
  async #join(table: readonly MountEntry[]): Promise<Placed[]> {
    const placed: Placed[] = [];
    for (const record of this.#o.store.all()) if (!this.#inFlight.has(record.hostPath)) placed.push(await place(record, table));
    return placed;
  }

  async #forget(record: DriveRecord): Promise<void> {
    this.#o.store.delete(record.hostPath);
    await removeCreated(this.#o.paths, record.hostPath, record.createdDir);
  }

  /** What the API shows of a drive: where it is now (a moved one at its new path), read-only as mounted. */
  #info({ record, state, now, entry }: Placed): DriveMountInfo {
    const mountPath = state === "moved" && now !== undefined ? this.#o.paths.toSandboxPath(now) : record.sandboxPath;
    return { driveName: record.driveName, mountPath, drivePath: record.drivePath, readOnly: entry ? entry.readOnly : record.readOnly, backend: record.backend };
  }

  /**
   * The mount point on the host: parents resolved through symlinks and
   * confined under --root; the resolved path must pass the same rules, and may
   * not overlap the agent's own state.
   */
  async #hostPathOf(mountPath: string): Promise<string> {
    const hostPath = await this.#o.paths.resolveParent(mountPath).catch((e: unknown) => {
      throw asMountPathError(e, mountPath);
    });
    checkMountTarget(this.#o.paths.toSandboxPath(hostPath), mountPath);
    // (Under a held root the paths are the sandbox's own, and the data dir is not in the sandbox at all.)
    const own = this.#o.paths.rootHeld ? [] : [[this.#o.dataDir, "data directory"] as const];
    for (const [dir, what] of [...own, [this.#o.drivesDir, "drives directory"] as const]) {
      if (overlaps(hostPath, realpathOrSelf(dir))) throw errors.badRequest(`mountPath: ${mountPath} overlaps the agent's ${what}`);
    }
    return hostPath;
  }

  /** Error text from mount(8) names host paths; clients see sandbox paths only. */
  #scrub(message: string, hostPath: string, mountPath: string): string {
    // Only a path that starts there: inside a longer one (the mount path itself may end with a sandbox's own
    // path, which is what the host path is under a held root) it is not the host's.
    const starting = (path: string) => new RegExp(`(?<![^\\s'"(:=])${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`, "g");
    return message.replace(starting(hostPath), () => mountPath).replace(starting(realpathOrSelf(this.#o.drivesDir)), "<drives-dir>");
  }

  #scrubError(e: unknown, hostPath: string, mountPath: string): unknown {
    if (!(e instanceof ApiError)) return e;
    return new ApiError(e.code, this.#scrub(e.message, hostPath, mountPath), { status: e.status });
  }
}
