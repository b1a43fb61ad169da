import type { Request, Response } from "express";
import { constants, promises as fsp } from "node:fs";
import { posix } from "node:path";
import { pipeline } from "node:stream/promises";
import { errors, fromFsError } from "../../src/errors.js";
import type { Pinned } from "../paths/sandbox-path.js";
import { downloadContentType } from "./content-type.js";

export type ByteRange = { start: number; end: number };

/**
 * The one satisfiable range of a `Range` header, per RFC 9110 §14: anything
 * but a single `bytes=` range (several ranges, another unit, bad syntax such
 * as `900-100`) is ignored and the whole file is sent (200); a range starting
 * at or past the end is "unsatisfiable" (416); an end past the end is clamped.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | "all" | "unsatisfiable" {
  if (!header) return "all";
  const match = /^bytes=\s*(\d*)-(\d*)\s*$/i.exec(header);
  if (!match || (match[1] === "" && match[2] === "")) return "all";
  if (match[1] === "") {
    const suffix = Number(match[2]);
    if (suffix === 0) return "unsatisfiable";
    return size === 0 ? "unsatisfiable" : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(match[1]);
  if (!Number.isSafeInteger(start)) return "all";
  // Open-ended (`5000-`): the end is the file's, so the start alone decides; checked before
  // comparing with an end that would be size - 1 (Go's http.ServeContent: no overlap → 416).
  if (match[2] === "") return start >= size ? "unsatisfiable" : { start, end: size - 1 };
  const end = Number(match[2]);
  if (!Number.isSafeInteger(end) || end < start) return "all";
  if (start >= size) return "unsatisfiable";
  return { start, end: Math.min(end, size - 1) };
}

/**
 * Streams a regular file from its pinned descriptor (never by path string:
 * the file was resolved beneath the root once), with Range, Last-Modified and
 * Content-Length. The name in Content-Disposition is the sandbox name, any
 * bytes it holds (`a\..\b` is a legal Linux file name).
 */
export async function download(req: Request, res: Response, target: Pinned): Promise<void> {
  const path = target.sandboxPath;
  // Reopens the pinned inode through its magic link (O_NOFOLLOW would refuse the link itself).
  const handle = await fsp.open(target.pinned!, constants.O_RDONLY).catch((err) => {
    throw fromFsError(err, "cannot read", path);
  });
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw errors.badRequest(`${path} is not a regular file`);
    const range = parseRange(req.headers.range, stat.size);
    if (range === "unsatisfiable") throw errors.rangeNotSatisfiable(`Range ${req.headers.range} is outside ${path} (${stat.size} bytes)`, stat.size);
    const name = posix.basename(path);
    // The reference writes filename="<name>"; express's encoder (RFC 6266, filename* for non-ASCII) for anything else.
    if (/^[\x20-\x7e]*$/.test(name) && !/["\\]/.test(name)) res.setHeader("Content-Disposition", `attachment; filename="${name}"`);
    else res.attachment(name);
    res.set({ "Accept-Ranges": "bytes", "Last-Modified": stat.mtime.toUTCString() });
    const { start, end } = range === "all" ? { start: 0, end: stat.size - 1 } : range;
    if (range !== "all") res.status(206).set("Content-Range", `bytes ${start}-${end}/${stat.size}`);
    res.set("Content-Length", String(Math.max(0, end - start + 1)));
    // The reference's own extension map (express would answer e.g. text/javascript, charset included).
    res.setHeader("Content-Type", downloadContentType(path));
    if (req.method === "HEAD" || end < start) {
      res.end();
      return;
    }
    const stream = handle.createReadStream({ start, end, autoClose: false });
    await pipeline(stream, res).catch(() => undefined); // the client went away mid-stream: nothing to answer
  } finally {
    await handle.close();
  }
}
