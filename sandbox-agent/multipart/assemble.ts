import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import { fsyncDir, removeQuietly, tempPathBeside } from "../../src/atomic-file.js";
import { errors } from "../../src/errors.js";

export interface PartFile {
  partNumber: number;
  path: string;
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
export async function assembleParts(parts: PartFile[], target: string, mode: number, uploadId: string): Promise<number> {
  const tmp = assemblyTempPath(target, uploadId);
  try {
    const out = await fsp.open(tmp, "w", mode);
    let total = 0;
    try {
      const buffer = Buffer.allocUnsafe(COPY_BUFFER);
      for (const part of parts) total += await appendFile(out, part, buffer);
      await out.sync();
    } finally {
      await out.close();
    }
    await fsp.chmod(tmp, mode);
    await fsp.rename(tmp, target);
    await fsyncDir(dirname(target));
    return total;
  } catch (err) {
    await removeQuietly(tmp);
    throw err;
  }
}

async function appendFile(out: fsp.FileHandle, part: PartFile, buffer: Buffer): Promise<number> {
  const src = await fsp.open(part.path, "r").catch((err) => {
    throw (err as NodeJS.ErrnoException).code === "ENOENT" ? errors.internal(`part ${part.partNumber} is missing from the agent's storage`) : err;
  });
  let copied = 0;
  try {
    for (;;) {
      const { bytesRead } = await src.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      let written = 0;
      while (written < bytesRead) written += (await out.write(buffer, written, bytesRead - written)).bytesWritten;
      copied += bytesRead;
    }
  } finally {
    await src.close();
  }
  if (copied !== part.size) throw errors.internal(`part ${part.partNumber} on disk has ${copied} bytes, ${part.size} were acknowledged`);
  return copied;
}
