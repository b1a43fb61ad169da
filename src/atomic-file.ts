import { randomBytes } from "node:crypto";
import { constants, promises as fsp } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createWriteStream } from "node:fs";

/**
 * Atomic file replacement: write a temp file beside the target (same
 * filesystem, so rename is atomic), fsync it, rename it over the target, fsync
 * the directory so the rename itself is durable. A crash at any point leaves
 * either the old file or the new one, never a torn one; the only debris is a
 * hidden `.<name>.<tag>.tmp` file.
 */
export function tempPathBeside(target: string, tag = randomBytes(6).toString("hex")): string {
  return join(dirname(target), `.${basename(target)}.${tag}.tmp`);
}

export async function fsyncDir(dir: string): Promise<void> {
  let handle: fsp.FileHandle | undefined;
  try {
    handle = await fsp.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    await handle.sync();
  } catch {
    // Some filesystems (e.g. certain FUSE or network mounts) refuse to fsync a
    // directory; the rename is still atomic there, only its durability is weaker.
  } finally {
    await handle?.close();
  }
}

export async function removeQuietly(path: string): Promise<void> {
  await fsp.rm(path, { force: true, recursive: true }).catch(() => undefined);
}

export interface AtomicWriteOptions {
  mode?: number;
  /** Reused as the temp-file tag so a crashed writer's debris can be found again. */
  tag?: string;
}

/** Writes `data` (bytes or a stream) to `target` atomically; returns the byte count. */
export async function writeFileAtomic(target: string, data: string | Uint8Array | Readable, options: AtomicWriteOptions = {}): Promise<number> {
  const tmp = tempPathBeside(target, options.tag);
  const mode = options.mode ?? 0o644;
  try {
    let size: number;
    if (typeof data === "string" || data instanceof Uint8Array) {
      const handle = await fsp.open(tmp, "wx", mode);
      try {
        const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
        await handle.writeFile(bytes);
        await handle.sync();
        size = bytes.byteLength;
      } finally {
        await handle.close();
      }
    } else {
      const out = createWriteStream(tmp, { flags: "wx", mode });
      await pipeline(data, out);
      size = out.bytesWritten;
      const handle = await fsp.open(tmp, "r+");
      try { await handle.sync(); } finally { await handle.close(); }
    }
    // The create mode is filtered by the umask; set the requested bits exactly.
    await fsp.chmod(tmp, mode);
    await fsp.rename(tmp, target);
    await fsyncDir(dirname(target));
    return size;
  } catch (err) {
    await removeQuietly(tmp);
    throw err;
  }
}
