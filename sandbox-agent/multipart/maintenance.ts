import { promises as fsp } from "node:fs";
import { join } from "node:path";
import { removeQuietly } from "../../src/atomic-file.js";
import type { Clock, Timer } from "../../src/clock.js";
import { assemblyTempPath } from "./assemble.js";
import type { MultipartService } from "./service.js";

/**
 * Start-up repair after a crash (kill -9 included): the database is the truth.
 * Upload directories it does not know, part files no row points at (a part cut
 * off before it was recorded) and temp files of an interrupted complete are
 * deleted; every recorded upload is kept and can be continued.
 */
export async function recoverUploads(service: MultipartService): Promise<{ orphanDirs: number; orphanFiles: number }> {
  const { store, dir, paths, logger } = service.options;
  await fsp.mkdir(dir, { recursive: true });
  const uploads = new Map(store.list().map((u) => [u.id, u]));
  let orphanDirs = 0;
  let orphanFiles = 0;
  for (const entry of await fsp.readdir(dir)) {
    if (!uploads.has(entry)) {
      await removeQuietly(join(dir, entry));
      orphanDirs++;
    }
  }
  for (const upload of uploads.values()) {
    const uploadDir = service.uploadDir(upload.id);
    await fsp.mkdir(uploadDir, { recursive: true });
    const known = new Set(store.parts(upload.id).map((p) => p.file));
    for (const file of await fsp.readdir(uploadDir)) {
      if (!known.has(file)) {
        await removeQuietly(join(uploadDir, file));
        orphanFiles++;
      }
    }
    // Beside the destination as resolved now, through the held parent directory (no host path string).
    await paths.use(upload.path, { follow: true }, (target) => removeQuietly(assemblyTempPath(target.entryPath, upload.id))).catch(() => undefined);
  }
  if (orphanDirs || orphanFiles) logger.info({ orphanDirs, orphanFiles }, "removed multipart debris left by an earlier run");
  return { orphanDirs, orphanFiles };
}

/** Runs the expiry sweep periodically; a quarter of the expiry, between 1 s and 10 min. */
export function startUploadSweeper(service: MultipartService, clock: Clock): { stop(): void } {
  const interval = Math.min(Math.max(service.options.expiryMs / 4, 1_000), 600_000);
  let timer: Timer | undefined;
  let stopped = false;
  const tick = () => {
    service
      .sweepExpired()
      .catch((err) => service.options.logger.error({ err }, "upload sweep failed"))
      .finally(() => {
        if (!stopped) timer = clock.setTimer(interval, tick);
      });
  };
  timer = clock.setTimer(interval, tick);
  return {
    stop() {
      stopped = true;
      timer?.cancel();
    },
  };
}
