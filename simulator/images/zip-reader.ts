import { mkdirSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { inflateRawSync } from "node:zlib";

/**
 * Unpacks the zip of a build context (what ImageInstance.build and `bl deploy` upload: archiver's zip of the
 * Dockerfile and its files) into a directory, from its central directory: stored and deflated entries,
 * regular files and directories. Entries are confined to the directory: an absolute name or one with a `..`
 * component is refused, and so are symbolic links (a context has no use for one that points outside).
 */

export class ZipError extends Error {}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

function endOfCentralDirectory(zip: Buffer): number {
  // The record is 22 bytes plus a comment of up to 65535.
  for (let at = zip.length - 22; at >= Math.max(0, zip.length - 22 - 0xffff); at--) if (zip.readUInt32LE(at) === EOCD) return at;
  throw new ZipError("not a zip archive (no end of central directory)");
}

function safeName(name: string): string[] {
  const parts = name.replace(/\\/g, "/").split("/");
  if (name.startsWith("/") || parts.some((p) => p === "..") || /^[A-Za-z]:/.test(name))
    throw new ZipError(`entry "${name}" would be written outside the context`);
  return parts.filter((p) => p !== "" && p !== ".");
}

/** Unpacks `zipFile` into `dir` (which exists); returns the number of files written. */
export async function unzipInto(zipFile: string, dir: string, maxBytes = 4 * 2 ** 30): Promise<number> {
  const zip = await readFile(zipFile);
  const end = endOfCentralDirectory(zip);
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  if (at === 0xffffffff || count === 0xffff) throw new ZipError("zip64 archives are not supported (a context over 4 GiB or 65535 files)");
  let files = 0;
  let total = 0;
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== CENTRAL) throw new ZipError("corrupt zip: bad central directory entry");
    const flags = zip.readUInt16LE(at + 8);
    const method = zip.readUInt16LE(at + 10);
    const compressed = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const madeBy = zip.readUInt16LE(at + 4) >> 8;
    const external = zip.readUInt32LE(at + 38);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString(flags & 0x800 ? "utf8" : "latin1", at + 46, at + 46 + nameLength);
    at += 46 + nameLength + extraLength + commentLength;
    const mode = madeBy === 3 ? external >>> 16 : 0; // Unix attributes
    if ((mode & 0o170000) === 0o120000) throw new ZipError(`entry "${name}" is a symbolic link: not taken in a build context`);
    const parts = safeName(name);
    if (parts.length === 0) continue;
    if (name.endsWith("/")) {
      mkdirSync(join(dir, ...parts), { recursive: true });
      continue;
    }
    if (flags & 1) throw new ZipError(`entry "${name}" is encrypted`);
    if (zip.readUInt32LE(local) !== LOCAL) throw new ZipError(`corrupt zip: bad local header for "${name}"`);
    const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(dataAt, dataAt + compressed);
    total += size;
    if (total > maxBytes) throw new ZipError(`the context unpacks to more than ${maxBytes} bytes`);
    let data: Buffer;
    if (method === 0) data = raw;
    else if (method === 8) data = inflateRawSync(raw, { maxOutputLength: Math.max(size, 1) });
    else throw new ZipError(`entry "${name}" uses compression method ${method} (stored and deflate are supported)`);
    if (data.length !== size) throw new ZipError(`corrupt zip: "${name}" is ${data.length} bytes, its header says ${size}`);
    mkdirSync(join(dir, ...parts.slice(0, -1)), { recursive: true });
    writeFileSync(join(dir, ...parts), data, { mode: mode & 0o777 || 0o644 });
    files++;
  }
  return files;
}
