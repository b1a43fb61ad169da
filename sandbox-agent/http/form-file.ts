import busboy from "busboy";
import type { Request } from "express";
import type { Readable } from "node:stream";
import { ApiError, errors } from "../../src/errors.js";

export interface FormFileOptions<T> {
  /** The form field carrying the file (the SDK uses `file`). */
  field: string;
  /** Largest file accepted; beyond it the request fails with 413. */
  maxFileSize?: number;
  /** Called for plain fields that arrive before the file. May throw an ApiError. */
  onField?: (name: string, value: string) => void;
  /** Consumes the file stream; must clean up after itself when the stream errors. */
  write: (file: Readable) => Promise<T>;
}

class Aborted extends Error {}

/**
 * Streams the one file of a multipart/form-data request into `write`, never
 * buffering it whole. A body cut short (client gone, size limit hit, broken
 * form) makes the file stream error, so `write` cleans up and nothing partial
 * is kept.
 */
export function receiveFormFile<T>(req: Request, options: FormFileOptions<T>): Promise<T> {
  const contentType = req.headers["content-type"] ?? "";
  if (!/^multipart\/form-data/i.test(contentType)) {
    return Promise.reject(errors.badRequest(`expected a multipart/form-data body with a "${options.field}" field, got Content-Type "${contentType}"`));
  }
  let parser: busboy.Busboy;
  try {
    // busboy signals 'limit' on *reaching* fileSize, so a file of exactly the
    // maximum would be refused: allow one byte more, and any file that gets there is too large.
    const fileSize = options.maxFileSize === undefined ? undefined : options.maxFileSize + 1;
    parser = busboy({ headers: req.headers, limits: { fileSize, fields: 32, fieldSize: 64 * 1024, parts: 64 } });
  } catch (err) {
    return Promise.reject(errors.badRequest(`invalid multipart body: ${(err as Error).message}`));
  }

  return new Promise<T>((resolve, reject) => {
    let writing: Promise<T> | undefined;
    let file: Readable | undefined;
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      file?.destroy(err instanceof Error ? err : new Error(String(err)));
      req.unpipe(parser);
      // Let the writer clean up before the response goes out.
      (writing ?? Promise.resolve()).catch(() => undefined).finally(() => reject(err));
    };

    parser.on("field", (name, value) => {
      try {
        if (!file) options.onField?.(name, value);
      } catch (err) {
        fail(err);
      }
    });
    parser.on("file", (name, stream) => {
      if (name !== options.field || file || failed) {
        stream.resume(); // not ours: drain and ignore, as the reference daemon does
        return;
      }
      file = stream;
      // Errors reach the caller through `fail`/`writing`; this listener only keeps an
      // error raised before `write` attaches its pipeline from crashing the process.
      stream.on("error", () => undefined);
      stream.on("limit", () => fail(errors.payloadTooLarge(`file exceeds the maximum size of ${options.maxFileSize} bytes`)));
      writing = options.write(stream);
      writing.catch((err) => fail(err));
    });
    parser.on("error", (err: Error) => fail(errors.badRequest(`malformed multipart body: ${err.message}`)));
    parser.on("close", () => {
      if (failed) return;
      if (!writing) return fail(errors.badRequest(`missing '${options.field}' field in multipart form`));
      writing.then(resolve, (err) => fail(err));
    });
    req.on("close", () => {
      if (!req.complete && !failed) fail(new Aborted("request body ended before it was complete"));
    });
    req.pipe(parser);
  }).catch((err) => {
    if (err instanceof ApiError) throw err;
    if (err instanceof Aborted) throw errors.badRequest(err.message);
    throw err;
  });
}
