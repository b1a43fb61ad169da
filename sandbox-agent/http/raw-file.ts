import type { Request } from "express";
import { Transform, type TransformCallback, type Readable } from "node:stream";
import { errors } from "../../src/errors.js";

/**
 * A request body of Content-Type application/octet-stream is the file itself
 * (as e2b's upload and `curl -T` send it): no form to parse, so the bytes go
 * to disk without busboy's boundary search, and a Content-Length over the
 * limit is refused before anything is read.
 */
export function isRawBody(req: Request): boolean {
  return /^application\/octet-stream\s*(;|$)/i.test(req.headers["content-type"] ?? "");
}

/** Counts bytes on their way through and fails the stream (413) past the limit, for bodies without a Content-Length. */
class SizeLimit extends Transform {
  #seen = 0;
  constructor(private readonly max: number | undefined) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#seen += chunk.length;
    if (this.max !== undefined && this.#seen > this.max) done(errors.payloadTooLarge(`file exceeds the maximum size of ${this.max} bytes`));
    else done(null, chunk);
  }
}

/**
 * Streams an application/octet-stream body into `write`, as receiveFormFile
 * does for a form's file: a body cut short or over `maxFileSize` makes the
 * stream fail, so `write` cleans up and nothing partial is kept.
 */
export async function receiveRawFile<T>(req: Request, options: { maxFileSize?: number; write: (file: Readable) => Promise<T> }): Promise<T> {
  const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
  if (declared !== undefined && options.maxFileSize !== undefined && declared > options.maxFileSize) {
    req.resume(); // discard the body: the connection stays usable for the 413
    throw errors.payloadTooLarge(`file of ${declared} bytes exceeds the maximum size of ${options.maxFileSize} bytes`);
  }
  const file = new SizeLimit(options.maxFileSize);
  const cutShort = errors.badRequest("request body ended before it was complete");
  let wasCutShort = false;
  req.on("close", () => {
    if (req.complete) return;
    wasCutShort = true;
    file.destroy(cutShort);
  });
  req.on("error", (err) => file.destroy(err));
  // Errors reach the caller through `write`'s pipeline; this listener only keeps one raised before
  // `write` attaches it (a writer opens its file first, and a small body can overflow meanwhile) from crashing the process.
  file.on("error", () => undefined);
  req.pipe(file);
  try {
    return await options.write(file);
  } catch (err) {
    req.unpipe(file);
    if (!req.complete) req.resume();
    throw wasCutShort ? cutShort : err;
  }
}
