import { createHash } from "node:crypto";
import { promises as fsp } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { removeQuietly } from "../../src/atomic-file.js";
import type { Clock } from "../../src/clock.js";
import { errors, fromFsError } from "../../src/errors.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import { ensureParentDir } from "../filesystem/write.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { assembleParts, completeInPlace } from "./assemble.js";
import { UploadClaims } from "./claims.js";
import { writeInPlace, writeOwnFile, type WrittenPart } from "./part-writer.js";
import { DATA_FILE, type PartRow, type UploadRow, type UploadStore } from "./upload-store.js";

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
  /** `${uploadId}:${partNumber}` of parts being written into the data file right now. */
  readonly #inPlaceWriters = new Set<string>();

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
    // Resolved confined and looked at through its descriptor (no host path string to be swapped under us).
    const isDirectory = await paths.use(path, { follow: true }, async ({ stat }) => stat?.isDirectory() === true);
    if (isDirectory) throw errors.conflict(`${path} is a directory`);
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
   * Streams one part, MD5 and size computed on the way, then records it. The
   * row is written only once every byte is written, so a cut-short body
   * leaves nothing behind; a re-upload of the same number replaces the row.
   *
   * Once part 1 has fixed the stride, a part's first upload goes straight into
   * the data file at (N-1) * stride, so complete needs no copy. A re-upload, or
   * a second concurrent upload of the same number, gets a file of its own: a
   * slot that a recorded row points at is never overwritten.
   */
  async putPart(
    id: string,
    partNumber: number,
    receive: (write: (file: Readable) => Promise<WrittenPart>) => Promise<WrittenPart>,
  ): Promise<{ partNumber: number; etag: string; size: number }> {
    const upload = this.#require(id);
    const finished = this.claims.beginPart(id);
    const slot = `${id}:${partNumber}`;
    const inPlace = upload.stride !== null && !this.#inPlaceWriters.has(slot) && !this.#o.store.part(id, partNumber);
    if (inPlace) this.#inPlaceWriters.add(slot);
    try {
      const dir = this.uploadDir(id);
      await fsp.mkdir(dir, { recursive: true });
      const written = await receive((file) =>
        (inPlace ? writeInPlace(dir, partNumber, upload.stride!, file) : writeOwnFile(dir, partNumber, file)).catch((err) => {
          throw fromFsError(err, `cannot store part ${partNumber} of`, upload.path);
        }),
      );
      const replaced = this.#o.store.recordPart(id, { partNumber, ...written, uploadedAt: this.#o.clock.now() });
      if (replaced && replaced.file !== DATA_FILE && replaced.file !== written.file) await removeQuietly(join(dir, replaced.file));
      return { partNumber, etag: written.etag, size: written.size };
    } finally {
      if (inPlace) this.#inPlaceWriters.delete(slot);
      finished();
    }
  }

  async complete(id: string, listed: CompletePart[]): Promise<{ message: string; path: string; size: number; etag: string }> {
    const upload = this.#require(id);
    if (listed.length === 0) throw errors.badRequest("parts: at least one part is required");
    for (let i = 1; i < listed.length; i++) {
      if (listed[i]!.partNumber <= listed[i - 1]!.partNumber) {
        throw errors.badRequest(
          `parts: must be in ascending partNumber order without duplicates (part ${listed[i]!.partNumber} follows part ${listed[i - 1]!.partNumber})`,
        );
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
      // The destination's directory is resolved and held open: the rename lands where it was checked.
      const size = await this.#o.paths.use(upload.path, { follow: true, createParents: true }, (target) => this.#assemble(upload, target.entryPath, chosen));
      this.#o.store.delete(id);
      await removeQuietly(this.uploadDir(id));
      this.#o.logger.info({ uploadId: id, path: upload.path, size, parts: chosen.length }, "multipart upload completed");
      return { message: "Multipart upload completed successfully", path: upload.path, size, etag: multipartEtag(chosen.map((p) => p.etag)) };
    } finally {
      // On success the upload is gone; on failure it stays, parts and all, for a retry.
      this.claims.release(id);
    }
  }

  /** The assembly file and the same-mount probe are the agent's own names: watchers do not report them. */
  readonly #announce = (name: string) => this.#o.paths.ownWrites.begin(name);

  async #assemble(upload: UploadRow, target: string, parts: PartRow[]): Promise<number> {
    try {
      const existing = await fsp.stat(target).catch(() => undefined);
      if (existing?.isDirectory()) throw errors.conflict(`${upload.path} is a directory`);
      await ensureParentDir(target, upload.path);
      const dir = this.uploadDir(upload.id);
      const files = parts.map((p) => ({ partNumber: p.partNumber, path: join(dir, p.file), offset: p.offset ?? 0, size: p.size }));
      // In place only if no recorded part beyond the listed ones lives in the
      // data file: cutting the file to size must not destroy a part a retry may need.
      const listedMax = parts[parts.length - 1]!.partNumber;
      const beyond = this.#o.store.parts(upload.id).some((p) => p.partNumber > listedMax && p.offset !== null);
      if (upload.stride !== null && !beyond) {
        const size = await completeInPlace({ dataFile: join(dir, DATA_FILE), stride: upload.stride, parts: files }, target, upload.permissions, this.#announce);
        if (size !== undefined) return size;
      }
      return await assembleParts(files, target, upload.permissions, upload.id, this.#announce);
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
