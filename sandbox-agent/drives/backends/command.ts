import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync, promises as fsp } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../../../src/clock.js";
import { errors } from "../../../src/errors.js";
import type { Logger } from "../../../src/logging.js";
import { expandTemplate } from "../command-template.js";
import { readMountTable, topMountAt } from "../mount-table.js";
import { detach, mountOn, unmountTarget } from "../pinned-mount.js";
import { describeExit, DriveBusyError, outputTail, PATH_MOUNT_PROGRAMS, run, type MountPrograms } from "../run.js";
import type { DriveBackend, MountSpec, Mounted, PinnedSpec } from "./types.js";

export interface CommandBackendOptions {
  mountCommand: readonly string[];
  /** Without one, `umount {mountPath}`. */
  unmountCommand?: readonly string[];
  readinessTimeoutMs: number;
  /** Where each mount command's output goes (it may outlive the agent). */
  logDir: string;
  clock: Clock;
  logger: Logger;
  /** umount(8) for lazy unmounts and clean-up (the mount command itself is the operator's). */
  programs?: MountPrograms;
}

const POLL_MS = 100;
const UNMOUNT_WAIT_MS = 10_000;
const EXIT_GRACE_MS = 2_000;

/**
 * Drives backed by an external program (rclone mount, sshfs, a FUSE client)
 * run from argv templates. Like the reference daemon's blfs launcher
 * (src/handler/drive/mount.go): the program may stay in the foreground (a FUSE
 * daemon) or daemonize and exit 0; the mount is ready once it shows in the
 * mount table *and* the directory can be listed. A non-zero exit, a failure to
 * start or the timeout kills the program and detaches anything it mounted.
 * The program is given the mount point as a path (`{mountPath}`) and resolves
 * it itself; readiness, clean-up and lazy unmounts use the held mount point
 * (pinned-mount.ts), so only a mount on the directory the agent checked is
 * ever taken for the drive or undone.
 */
export class CommandBackend implements DriveBackend {
  readonly name = "command" as const;
  readonly mountPoint = "directory" as const;
  readonly supportsReadOnly = true;
  readonly description: string;
  /** Foreground mount programs started by this agent, by host mount path. */
  readonly #children = new Map<string, ChildProcess>();

  constructor(private readonly options: CommandBackendOptions) {
    this.description = `command: drives mounted by ${JSON.stringify(options.mountCommand)}, unmounted by ${JSON.stringify(options.unmountCommand ?? ["umount", "{mountPath}"])}`;
  }

  async mount(spec: PinnedSpec): Promise<Mounted> {
    const argv = expandTemplate(this.options.mountCommand, placeholders(spec));
    mkdirSync(this.options.logDir, { recursive: true });
    const logFile = join(this.options.logDir, `mount-${this.options.clock.now()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}.log`);
    const fd = openSync(logFile, "w");
    let child: ChildProcess;
    try {
      // Own process group (detached): the program must outlive an agent
      // restart, and on failure the whole group is killed.
      child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ["ignore", fd, fd] });
    } finally {
      closeSync(fd);
    }
    child.unref();
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let spawnError: Error | undefined;
    child.on("exit", (code, signal) => (exit = { code, signal }));
    child.on("error", (err) => (spawnError = err));

    const deadline = this.options.clock.now() + this.options.readinessTimeoutMs;
    for (;;) {
      if (spawnError) throw errors.internal(`Failed to mount drive: mount command could not start: ${spawnError.message}`);
      if (exit && exit.code !== 0) {
        await this.#cleanUp(child, spec);
        const how = exit.code === null ? `was killed by ${exit.signal}` : `exited with status ${exit.code}`;
        throw errors.internal(`Failed to mount drive: mount command ${how}: ${await tail(logFile)}`);
      }
      if (await isReady(spec)) break;
      if (this.options.clock.now() >= deadline) {
        await this.#cleanUp(child, spec);
        throw errors.internal(
          `Failed to mount drive: timeout waiting for the mount to be ready after ${this.options.readinessTimeoutMs / 1000}s: ${await tail(logFile)}`,
        );
      }
      await sleep(this.options.clock, POLL_MS);
    }
    if (!exit) this.#children.set(spec.hostMountPath, child);
    this.options.logger.debug({ argv, logFile, pid: child.pid }, "drive mount command ready");
    return {};
  }

  async unmount(spec: PinnedSpec, lazy: boolean): Promise<void> {
    if (lazy || !this.options.unmountCommand) {
      // A lazy unmount is a kernel feature, not the program's: umount -l.
      await unmountTarget(spec.target, lazy, this.options.programs ?? PATH_MOUNT_PROGRAMS);
    } else {
      const result = await run(expandTemplate(this.options.unmountCommand, placeholders(spec)));
      if (result.code !== 0) {
        const text = outputTail(result);
        if (/busy/i.test(text)) throw new DriveBusyError(text);
        throw errors.internal(`Failed to unmount drive: unmount command ${describeExit(result)}: ${text}`);
      }
    }
    const deadline = this.options.clock.now() + UNMOUNT_WAIT_MS;
    while (topMountAt(await readMountTable(spec.target.table), spec.hostMountPath)) {
      if (this.options.clock.now() >= deadline)
        throw errors.internal(`Failed to unmount drive: still mounted ${UNMOUNT_WAIT_MS / 1000}s after the unmount command succeeded`);
      await sleep(this.options.clock, POLL_MS);
    }
    await this.#reap(spec.hostMountPath);
  }

  /** A FUSE daemon exits by itself once unmounted; one that does not is terminated. */
  async #reap(hostPath: string): Promise<void> {
    const child = this.#children.get(hostPath);
    this.#children.delete(hostPath);
    if (!child) return;
    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      if (await exitsWithin(child, EXIT_GRACE_MS, this.options.clock)) return;
      killGroup(child, signal);
    }
    await exitsWithin(child, EXIT_GRACE_MS, this.options.clock);
  }

  async #cleanUp(child: ChildProcess, spec: PinnedSpec): Promise<void> {
    killGroup(child, "SIGKILL");
    // Answer only once the program is really gone (reaped), not just signalled.
    await exitsWithin(child, EXIT_GRACE_MS, this.options.clock);
    const mounted = await mountOn(spec.target.dirFd!, spec.target.table).catch(() => undefined);
    if (!mounted) return;
    await detach(mounted.root, this.options.programs ?? PATH_MOUNT_PROGRAMS).catch(() => undefined);
    await mounted.root.close();
  }
}

function placeholders(spec: MountSpec) {
  return { driveName: spec.driveName, drivePath: spec.drivePath, mountPath: spec.hostMountPath, readOnly: String(spec.readOnly) };
}

/**
 * Phase 1: the path is a mount point — read-only if that was asked, so a
 * client still finishing its set-up is never reported as a writable
 * read-only drive; phase 2: it can be listed (a FUSE client answers).
 */
async function isReady(spec: PinnedSpec): Promise<boolean> {
  const mounted = await mountOn(spec.target.dirFd!, spec.target.table);
  if (!mounted) return false;
  try {
    if (spec.readOnly && !mounted.entry.readOnly) return false;
    return await fsp.readdir(`/proc/self/fd/${mounted.root.fd}`).then(
      () => true,
      () => false,
    );
  } finally {
    await mounted.root.close();
  }
}

/** Resolves true once the child has exited (and been reaped), false after `ms`. */
function exitsWithin(child: ChildProcess, ms: number, clock: Clock): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = clock.setTimer(ms, () => resolve(false));
    child.once("exit", () => {
      timer.cancel();
      resolve(true);
    });
  });
}

/** Signals the program's whole process group (a daemonized child included). */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group is gone already.
  }
}

function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimer(ms, resolve));
}

async function tail(file: string): Promise<string> {
  const text = await fsp.readFile(file, "utf8").catch(() => "");
  const trimmed = text.trim();
  if (trimmed === "") return "(no output)";
  return trimmed.length > 300 ? `…${trimmed.slice(-300)}` : trimmed;
}
