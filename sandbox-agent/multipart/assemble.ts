import { constants, promises as fsp } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fsyncDir, removeQuietly, tempPathBeside, type Announce } from "../../src/atomic-file.js";
import { errors } from "../../src/errors.js";

export interface PartFile {
  partNumber: number;
  path: string;
  /** Where the part starts in `path` (parts written in place share one file). */
  offset: number;
  size: number;
}

const COPY_BUFFER = 4 * 1024 * 1024;

/** The temp file a complete of `uploadId` assembles into, beside the destination. */
export function assemblyTempPath(target: string, uploadId: string): string {
  return tempPathBeside(target, `upload-${uploadId}`);
}

/**
 * Concatenates the parts into a temp file beside `target` (named after the
 * upload, so two uploads to one destination never share it), fsyncs it and
 * renames it over the target. A pre-existing target is untouched until that
 * rename; on any failure the temp file is removed and the target is as it was.
 */
export async function assembleParts(parts: PartFile[], target: string, mode: number, uploadId: string, announce?: Announce): Promise<number> {
  const tmp = assemblyTempPath(target, uploadId);
  const settled = announce?.(basename(tmp));
  try {
    // O_NOFOLLOW: the temp name sits in a directory the sandbox's processes write to.
    const out = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, mode);
    let total = 0;
    try {
      const buffer = Buffer.allocUnsafe(COPY_BUFFER);
      for (const part of parts) {
        await copyRange(part, out, total, buffer);
        total += part.size;
      }
      await out.sync();
    } finally {
      await out.close();
    }
    await commit(tmp, target, mode);
    return total;
  } catch (err) {
    await removeQuietly(tmp);
    throw err;
  } finally {
    settled?.();
  }
}

export interface InPlaceLayout {
  /** The upload's data file, holding parts written at (N-1) * stride. */
  dataFile: string;
  stride: number;
  /** The listed parts, 1..k; those with a file of their own are copied into place first. */
  parts: PartFile[];
}

/**
 * The no-copy complete: when the listed parts are exactly 1..k, all but the
 * last of the stride's size, the data file already is the object. Parts that
 * were written to files of their own (the first few, before the stride was
 * known, or re-uploads) are copied into their slots, the file is cut to size,
 * fsynced and renamed over the target. Returns undefined when the layout does
 * not fit or the data file is on another filesystem than the target, and the
 * caller assembles by copying instead (also when the rename fails with EXDEV:
 * two mounts of one filesystem share st_dev, so that is found out by trying).
 */
export async function completeInPlace(layout: InPlaceLayout, target: string, mode: number, announce?: Announce): Promise<number | undefined> {
  const { dataFile, stride, parts } = layout;
  const last = parts.length - 1;
  const fits = parts.every((p, i) => p.partNumber === i + 1 && (i < last ? p.size === stride : p.size <= stride));
  if (!fits) return undefined;
  const [data, targetDir] = await Promise.all([fsp.stat(dataFile).catch(() => undefined), fsp.stat(dirname(target))]);
  if (!data || data.dev !== targetDir.dev || !(await sameMount(dataFile, dirname(target), announce))) return undefined;

  const total = last * stride + parts[last]!.size;
  const out = await fsp.open(dataFile, constants.O_RDWR);
  try {
    const buffer = Buffer.allocUnsafe(COPY_BUFFER);
    for (const part of parts) {
      const slot = (part.partNumber - 1) * stride;
      if (part.path === dataFile && part.offset === slot) continue;
      await copyRange(part, out, slot, buffer);
    }
    await out.truncate(total);
    await out.sync();
  } finally {
    await out.close();
  }
  try {
    await commit(dataFile, target, mode);
  } catch (err) {
    // Same device (st_dev) but another mount — the data dir and the sandbox root
    // bind-mounted separately (bwrap, docker): rename(2) refuses to cross mounts.
    // The caller then copies into a temp file beside the target and renames that.
    if ((err as NodeJS.ErrnoException).code === "EXDEV") return undefined;
    throw err;
  }
  return total;
}

/**
 * Whether `file` can be renamed into `dir`: the same device is not enough when
 * they are different mounts of it (an isolated sandbox's data dir and root are
 * two bind mounts): rename then fails with EXDEV. A hard link fails the same way, and costs nothing to undo.
 */
async function sameMount(file: string, dir: string, announce?: Announce): Promise<boolean> {
  const probe = join(dir, `.sandbox-agent-link-probe-${process.pid}-${Date.now()}`);
  const settled = announce?.(basename(probe));
  try {
    await fsp.link(file, probe);
    await fsp.unlink(probe).catch(() => {});
    return true;
  } catch {
    return false;
  } finally {
    settled?.();
  }
}

async function commit(file: string, target: string, mode: number): Promise<void> {
  const handle = await fsp.open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    await handle.chmod(mode);
  } finally {
    await handle.close();
  }
  await fsp.rename(file, target);
  await fsyncDir(dirname(target));
}

/** Copies one part's bytes to `out` at `position`, checking the count acknowledged for it. */
async function copyRange(part: PartFile, out: fsp.FileHandle, position: number, buffer: Buffer): Promise<void> {
  const src = await fsp.open(part.path, "r").catch((err) => {
    throw (err as NodeJS.ErrnoException).code === "ENOENT" ? errors.internal(`part ${part.partNumber} is missing from the agent's storage`) : err;
  });
  let copied = 0;
  try {
    while (copied < part.size) {
      const { bytesRead } = await src.read(buffer, 0, Math.min(buffer.length, part.size - copied), part.offset + copied);
      if (bytesRead === 0) break;
      for (let written = 0; written < bytesRead;) {
        written += (await out.write(buffer, written, bytesRead - written, position + copied + written)).bytesWritten;
      }
      copied += bytesRead;
    }
  } finally {
    await src.close();
  }
  if (copied !== part.size) throw errors.internal(`part ${part.partNumber} on disk has ${copied} bytes, ${part.size} were acknowledged`);
}
