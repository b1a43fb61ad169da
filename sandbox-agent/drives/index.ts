import { join } from "node:path";
import type { Clock } from "../../src/clock.js";
import type { Logger } from "../../src/logging.js";
import type { Db } from "../../src/sqlite.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { createBackend } from "./backends/index.js";
import { DriveService } from "./service.js";
import { DriveStore } from "./drive-store.js";
import { PATH_MOUNT_PROGRAMS, type MountPrograms } from "./run.js";

type BackendOptions = Parameters<typeof createBackend>[0];
type ServiceOptions = ConstructorParameters<typeof DriveService>[0];

/** What the drives read of the agent's configuration (--drives-dir, --drive-backend, --mount-program, ...). */
export interface DriveSettings {
  dataDir: string;
  drivesDir?: string;
  driveBackend: BackendOptions["backend"];
  driveMountCommand?: BackendOptions["mountCommand"];
  driveUnmountCommand?: BackendOptions["unmountCommand"];
  driveMountTimeoutMs: BackendOptions["readinessTimeoutMs"];
  mountProgram?: MountPrograms["mount"];
  umountProgram?: MountPrograms["umount"];
  drivesExistingOnly: ServiceOptions["existingOnly"];
  sandboxName: ServiceOptions["sandboxName"];
}

/** --mount-program / --umount-program, else mount(8) and umount(8) from PATH. */
function mountPrograms(config: DriveSettings): MountPrograms {
  return { mount: config.mountProgram ?? PATH_MOUNT_PROGRAMS.mount, umount: config.umountProgram ?? PATH_MOUNT_PROGRAMS.umount };
}

export { DRIVE_MIGRATIONS } from "./drive-store.js";
export { DriveService } from "./service.js";

/**
 * Builds the drive service, reports its backend, and adopts the drives a
 * previous agent left mounted (shutdown never unmounts: processes may still
 * be using them).
 */
export async function openDrives(config: DriveSettings, db: Db, paths: SandboxPaths, clock: Clock, logger: Logger): Promise<DriveService> {
  const drivesDir = config.drivesDir ?? join(config.dataDir, "drives");
  const backend = createBackend({
    backend: config.driveBackend,
    drivesDir,
    mountCommand: config.driveMountCommand,
    unmountCommand: config.driveUnmountCommand,
    programs: mountPrograms(config),
    readinessTimeoutMs: config.driveMountTimeoutMs,
    logDir: join(config.dataDir, "drive-logs"),
    clock,
    logger,
  });
  if (backend.name === "symlink") {
    paths.requireHostLinks("the symlink drive backend links drives into the root by host path, which openat2 would resolve inside the root");
  }
  const service = new DriveService({
    backend,
    programs: mountPrograms(config),
    store: new DriveStore(db),
    paths,
    drivesDir,
    existingOnly: config.drivesExistingOnly,
    sandboxName: config.sandboxName,
    dataDir: config.dataDir,
    clock,
    logger,
  });
  const { adopted, forgotten } = await service.adopt();
  const line = { backend: backend.name, description: backend.description, adopted, forgotten };
  if (backend.name === "symlink") logger.warn(line, "drives: symlink backend, for unprivileged local development only (not real mounts)");
  else logger.info(line, "drives backend");
  return service;
}
