import { createHash, randomBytes } from "node:crypto";
import { createWriteStream, promises as fsp } from "node:fs";
import { join } from "node:path";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fsyncDir, removeQuietly } from "../../src/atomic-file.js";
import type { Clock } from "../../src/clock.js";
import { errors, fromFsError } from "../../src/errors.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import { ensureParentDir } from "../filesystem/write.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { assembleParts } from "./assemble.js";
import { UploadClaims } from "./claims.js";
import type { PartRow, UploadRow, UploadStore } from "./store.js";

export interface MultipartOptions {
  store: UploadStore;
  /** Where part files live: `<dir>/<uploadId>/part-<n>.<random>`. */
  dir: string;
  paths: SandboxPaths;
  clock: Clock;
  ids: Ids;
  logger: Logger;
  expiryMs: number;
  maxOpenUploads: number;
}

export interface CompletePart {
  partNumber: number;
  etag: string;
}

/** S3 clients quote etags; ours are bare lowercase hex. */
export function normalizeEtag(etag: string): string {
  return etag.trim().replace(/^W\//, "").replace(/^"|"$/g, "").toLowerCase();
}

/** The S3 convention for a multipart object's etag: md5 of the part md5s, then `-N`. */
export function multipartEtag(partEtags: string[]): string {
  const md5 = createHash("md5");
  for (const e of partEtags) md5.update(Buffer.from(e, "hex"));
  return `${md5.digest("hex")}-${partEtags.length}`;
}

export class MultipartService {
  readonly claims = new UploadClaims();
  readonly #o: MultipartOptions;

  constructor(options: MultipartOptions) {
    this.#o = options;
  }

  get options(): MultipartOptions {
    return this.#o;
  }

  uploadDir(id: string): string {
    return join(this.#o.dir, id);
  }

  #require(id: string): UploadRow {
    const upload = this.#o.store.get(id);
    if (!upload) throw errors.notFound(`upload not found: ${id}`);
    return upload;
  }

  async initiate(rawPath: string, permissions: number): Promise<{ uploadId: string; path: string }> {
    const { store, paths, clock, ids } = this.#o;
    const path = paths.normalize(rawPath);
    if (path === "/") throw errors.badRequest("path: the sandbox root cannot be an upload destination");
    const target = await paths.resolve(path);
    const existing = await fsp.stat(target).catch(() => undefined);
    if (existing?.isDirectory()) throw errors.conflict(`${path} is a directory`);
    if (store.count() >= this.#o.maxOpenUploads) {
      throw errors.tooManyRequests(`too many open uploads (${this.#o.maxOpenUploads}): complete or abort some first`);
    }
    const uploadId = ids();
    await fsp.mkdir(this.uploadDir(uploadId), { recursive: true }).catch((err) => {
      throw fromFsError(err, "cannot create upload storage for", path);
    });
    store.insert({ id: uploadId, path, permissions, initiatedAt: clock.now() });
    this.#o.logger.info({ uploadId, path }, "multipart upload initiated");
    return { uploadId, path };
  }

  /**
   * Streams one part to its own file (MD5 and size computed on the way),
   * fsyncs it, then records it. The row is written only once the bytes are
   * durable, so a cut-short body leaves nothing behind, and a re-upload of the
   * same number replaces the row and deletes the file it replaced.
   */
  async putPart(
    id: string,
    partNumber: number,
    receive: (write: (file: Readable) => Promise<PartRow>) => Promise<PartRow>,
  ): Promise<{ partNumber: number; etag: string; size: number }> {
    const upload = this.#require(id);
    const finished = this.claims.beginPart(id);
    try {
      const dir = this.uploadDir(id);
      const part = await receive((file) => this.#writePart(dir, partNumber, file).catch((err) => {
        throw fromFsError(err, `cannot store part ${partNumber} of`, upload.path);
      }));
      const replaced = this.#o.store.recordPart(id, part);
      if (replaced && replaced !== part.file) await removeQuietly(join(dir, replaced));
      return { partNumber, etag: part.etag, size: part.size };
    } finally {
      finished();
    }
  }

  async #writePart(dir: string, partNumber: number, file: Readable): Promise<PartRow> {
    const name = `part-${partNumber}.${randomBytes(6).toString("hex")}`;
    const path = join(dir, name);
    const md5 = createHash("md5");
    let size = 0;
    const hashing = new Transform({
      transform(chunk: Buffer, _enc, done) {
        md5.update(chunk);
        size += chunk.length;
        done(null, chunk);
      },
    });
    try {
      await fsp.mkdir(dir, { recursive: true });
      const out = createWriteStream(path, { flags: "wx", highWaterMark: 1024 * 1024 });
      await pipeline(file, hashing, out);
      const handle = await fsp.open(path, "r");
      try { await handle.sync(); } finally { await handle.close(); }
      await fsyncDir(dir);
    } catch (err) {
      await removeQuietly(path);
      throw err;
    }
    return { partNumber, etag: md5.digest("hex"), size, file: name, uploadedAt: this.#o.clock.now() };
  }

  async complete(id: string, listed: CompletePart[]): Promise<{ message: string; path: string; size: number; etag: string }> {
    const upload = this.#require(id);
    if (listed.length === 0) throw errors.badRequest("parts: at least one part is required");
    for (let i = 1; i < listed.length; i++) {
      if (listed[i]!.partNumber <= listed[i - 1]!.partNumber) {
        throw errors.badRequest(`parts: must be in ascending partNumber order without duplicates (part ${listed[i]!.partNumber} follows part ${listed[i - 1]!.partNumber})`);
      }
    }
    await this.claims.claim(id, "complete");
    try {
      const stored = new Map(this.#o.store.parts(id).map((p) => [p.partNumber, p]));
      const chosen = listed.map(({ partNumber, etag }) => {
        const part = stored.get(partNumber);
        if (!part) throw errors.badRequest(`parts: part ${partNumber} was never uploaded`);
        if (normalizeEtag(etag) !== part.etag) throw errors.badRequest(`parts: etag mismatch for part ${partNumber}: uploaded ${part.etag}, got ${etag}`);
        return part;
      });
      const target = await this.#o.paths.resolve(upload.path);
      const size = await this.#assemble(upload, target, chosen);
      this.#o.store.delete(id);
      await removeQuietly(this.uploadDir(id));
      this.#o.logger.info({ uploadId: id, path: upload.path, size, parts: chosen.length }, "multipart upload completed");
      return { message: "Multipart upload completed successfully", path: upload.path, size, etag: multipartEtag(chosen.map((p) => p.etag)) };
    } finally {
      // On success the upload is gone; on failure it stays, parts and all, for a retry.
      this.claims.release(id);
    }
  }

  async #assemble(upload: UploadRow, target: string, parts: PartRow[]): Promise<number> {
    try {
      const existing = await fsp.stat(target).catch(() => undefined);
      if (existing?.isDirectory()) throw errors.conflict(`${upload.path} is a directory`);
      await ensureParentDir(target, upload.path);
      const dir = this.uploadDir(upload.id);
      const files = parts.map((p) => ({ partNumber: p.partNumber, path: join(dir, p.file), size: p.size }));
      return await assembleParts(files, target, upload.permissions, upload.id);
    } catch (err) {
      throw fromFsError(err, "cannot complete upload to", upload.path);
    }
  }

  async abort(id: string): Promise<{ message: string; path: string }> {
    const upload = this.#require(id);
    await this.claims.claim(id, "abort");
    try {
      await this.#remove(upload);
    } finally {
      this.claims.release(id);
    }
    this.#o.logger.info({ uploadId: id, path: upload.path }, "multipart upload aborted");
    return { message: "Multipart upload aborted successfully", path: upload.path };
  }

  /** Deletes the parts from disk first: if that fails, the upload stays listed and can be aborted again. */
  async #remove(upload: UploadRow): Promise<void> {
    await fsp.rm(this.uploadDir(upload.id), { recursive: true, force: true }).catch((err) => {
      throw fromFsError(err, "cannot remove the parts of upload to", upload.path);
    });
    this.#o.store.delete(upload.id);
  }

  listParts(id: string) {
    const upload = this.#require(id);
    return { uploadId: id, path: upload.path, parts: this.#o.store.parts(id).map(publicPart) };
  }

  listUploads() {
    return {
      uploads: this.#o.store.list().map((u) => ({
        uploadId: u.id,
        path: u.path,
        permissions: u.permissions,
        initiatedAt: new Date(u.initiatedAt).toISOString(),
        expiresAt: new Date(u.lastActivityAt + this.#o.expiryMs).toISOString(),
        parts: Object.fromEntries(this.#o.store.parts(u.id).map((p) => [String(p.partNumber), publicPart(p)])),
      })),
    };
  }

  /** Aborts uploads idle for longer than the expiry; returns how many. */
  async sweepExpired(): Promise<number> {
    let removed = 0;
    for (const upload of this.#o.store.idleSince(this.#o.clock.now() - this.#o.expiryMs)) {
      if (this.claims.isBusy(upload.id)) continue;
      try {
        await this.claims.claim(upload.id, "abort");
        await this.#remove(upload);
        removed++;
        this.#o.logger.info({ uploadId: upload.id, path: upload.path }, "multipart upload expired");
      } catch (err) {
        this.#o.logger.warn({ err, uploadId: upload.id }, "could not expire multipart upload");
      } finally {
        this.claims.release(upload.id);
      }
    }
    return removed;
  }
}

function publicPart(p: PartRow) {
  return { partNumber: p.partNumber, etag: p.etag, size: p.size, uploadedAt: new Date(p.uploadedAt).toISOString() };
}
