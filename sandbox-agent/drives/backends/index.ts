import { readFileSync } from "node:fs";
import type { Clock } from "../../../src/clock.js";
import type { Logger } from "../../../src/logging.js";
import { BindBackend } from "./bind.js";
import { CommandBackend } from "./command.js";
import { SymlinkBackend } from "./symlink.js";
import type { BackendName, DriveBackend } from "./types.js";
import { PATH_MOUNT_PROGRAMS, type MountPrograms } from "../run.js";

const CAP_SYS_ADMIN = 21n;

/**
 * Whether this process may mount: root with CAP_SYS_ADMIN in its effective
 * set (/proc/self/status CapEff). Read, not probed, so starting an agent has
 * no side effects; a seccomp or LSM policy can still refuse, and the mount
 * call then reports it.
 */
export function mayMount(statusFile = "/proc/self/status"): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    const line = readFileSync(statusFile, "utf8")
      .split("\n")
      .find((l) => l.startsWith("CapEff:"));
    if (!line) return false;
    return ((BigInt(`0x${line.slice("CapEff:".length).trim()}`) >> CAP_SYS_ADMIN) & 1n) === 1n;
  } catch {
    return false;
  }
}

export interface BackendOptions {
  backend: BackendName | "auto";
  drivesDir: string;
  mountCommand?: readonly string[];
  unmountCommand?: readonly string[];
  /** mount(8) and umount(8) the bind backend (and clean-ups) run. */
  programs?: MountPrograms;
  readinessTimeoutMs: number;
  logDir: string;
  clock: Clock;
  logger: Logger;
}

/** `auto` is bind where the agent may mount, symlink (development only) elsewhere. */
export function createBackend(options: BackendOptions): DriveBackend {
  const name = options.backend === "auto" ? (mayMount() ? "bind" : "symlink") : options.backend;
  switch (name) {
    case "bind":
      return new BindBackend(options.drivesDir, options.programs);
    case "symlink":
      return new SymlinkBackend(options.drivesDir);
    case "command":
      if (!options.mountCommand) throw new Error("--drive-backend command needs --drive-mount-command");
      return new CommandBackend({
        mountCommand: options.mountCommand,
        unmountCommand: options.unmountCommand,
        readinessTimeoutMs: options.readinessTimeoutMs,
        logDir: options.logDir,
        clock: options.clock,
        logger: options.logger,
        programs: options.programs,
      });
  }
}

/**
 * The backend that undoes a mount recorded under `name`: the active one, or —
 * after a restart with another --drive-backend — a plain one of that kind
 * (a command mount is then detached with umount(8)).
 */
export function backendFor(name: BackendName, active: DriveBackend, drivesDir: string, programs: MountPrograms = PATH_MOUNT_PROGRAMS): DriveBackend {
  if (name === active.name) return active;
  return name === "symlink" ? new SymlinkBackend(drivesDir) : new BindBackend(drivesDir, programs);
}
