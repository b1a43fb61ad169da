import { randomBytes } from "node:crypto";
import { constants, promises as fsp } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Readable } from "node:stream";

/**
 * Atomic file replacement: write a temp file beside the target (same
 * filesystem, so rename is atomic), fsync it, rename it over the target, fsync
 * the directory so the rename itself is durable. A crash at any point leaves
 * either the old file or the new one, never a torn one; the only debris is a
 * hidden `.<tag>.tmp` file. The temp name does not repeat the target's, so a
 * name of 255 bytes (Linux's limit) can still be written.
 */
export function tempPathBeside(target: string, tag = randomBytes(6).toString("hex")): string {
  return join(dirname(target), `.${tag}.tmp`);
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

/** Told a temp file's name before it is created; the returned call once it is renamed or removed (watchers hide it). */
export type Announce = (tempName: string) => () => void;

export interface AtomicWriteOptions {
  mode?: number;
  /** Reused as the temp-file tag so a crashed writer's debris can be found again. */
  tag?: string;
  /** Owner to give the new file (before it replaces the target); failures are ignored (not root). */
  owner?: { uid: number; gid: number };
  announce?: Announce;
}

/**
 * Writes `data` (bytes or a stream) to `target` atomically; returns the byte
 * count. Mode and owner are set on the open descriptor (O_EXCL created it), so
 * a temp name swapped for a symlink meanwhile can redirect nothing.
 */
export async function writeFileAtomic(target: string, data: string | Uint8Array | Readable, options: AtomicWriteOptions = {}): Promise<number> {
  const tmp = tempPathBeside(target, options.tag);
  const mode = options.mode ?? 0o644;
  const settled = options.announce?.(basename(tmp));
  try {
    let size: number;
    const handle = await fsp.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
    try {
      if (typeof data === "string" || data instanceof Uint8Array) {
        const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
        await handle.writeFile(bytes);
        size = bytes.byteLength;
      } else {
        // Pulled chunk by chunk (backpressure for free); a stream on the handle would pin it open past close().
        size = 0;
        for await (const chunk of data) {
          const bytes = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
          for (let done = 0; done < bytes.length;) done += (await handle.write(bytes, done, bytes.length - done)).bytesWritten;
          size += bytes.length;
        }
      }
      await handle.sync();
      // The create mode is filtered by the umask; set the requested bits exactly.
      await handle.chmod(mode);
      if (options.owner) await handle.chown(options.owner.uid, options.owner.gid).catch(() => undefined);
    } finally {
      await handle.close();
    }
    await fsp.rename(tmp, target);
    await fsyncDir(dirname(target));
    return size;
  } catch (err) {
    await removeQuietly(tmp);
    throw err;
  } finally {
    settled?.();
  }
}
