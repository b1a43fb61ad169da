import type { Db, Migration } from "../../src/sqlite.js";

/** Upload metadata lives in SQLite so it survives restarts (kill -9 included). */
export const MULTIPART_MIGRATIONS: Migration[] = [
  {
    id: "multipart/001-uploads",
    sql: `
      CREATE TABLE multipart_uploads (
        id               TEXT PRIMARY KEY,
        path             TEXT NOT NULL,
        permissions      INTEGER NOT NULL,
        initiated_at     INTEGER NOT NULL,
        last_activity_at INTEGER NOT NULL
      );
      CREATE TABLE multipart_parts (
        upload_id   TEXT NOT NULL REFERENCES multipart_uploads(id) ON DELETE CASCADE,
        part_number INTEGER NOT NULL,
        etag        TEXT NOT NULL,
        size        INTEGER NOT NULL,
        file        TEXT NOT NULL,
        uploaded_at INTEGER NOT NULL,
        PRIMARY KEY (upload_id, part_number)
      ) WITHOUT ROWID;
    `,
  },
  {
    // Parts written in place into one data file: the upload's stride is the
    // size of part 1, part N lives at (N-1) * stride. NULL = its own file.
    id: "multipart/002-in-place-parts",
    sql: `
      ALTER TABLE multipart_uploads ADD COLUMN stride INTEGER;
      ALTER TABLE multipart_parts ADD COLUMN offset INTEGER;
    `,
  },
];

/** The file inside an upload's directory that holds the parts written in place. */
export const DATA_FILE = "data";

export interface UploadRow {
  id: string;
  path: string;
  permissions: number;
  initiatedAt: number;
  lastActivityAt: number;
  /** Size of part 1 once known: later parts are written in place at (N-1) * stride. */
  stride: number | null;
}

export interface PartRow {
  partNumber: number;
  etag: string;
  size: number;
  /** File name inside the upload's directory (DATA_FILE for a part written in place). */
  file: string;
  /** Byte offset in DATA_FILE for a part written in place, else null. */
  offset: number | null;
  uploadedAt: number;
}

export class UploadStore {
  readonly #insertUpload;
  readonly #getUpload;
  readonly #listUploads;
  readonly #countUploads;
  readonly #deleteUpload;
  readonly #touch;
  readonly #getPart;
  readonly #upsertPart;
  readonly #listParts;
  readonly #expired;
  readonly #replacePart;
  readonly #setStride;

  constructor(db: Db) {
    const cols = "id, path, permissions, initiated_at AS initiatedAt, last_activity_at AS lastActivityAt, stride";
    const partCols = "part_number AS partNumber, etag, size, file, offset, uploaded_at AS uploadedAt";
    this.#insertUpload = db.prepare(
      "INSERT INTO multipart_uploads (id, path, permissions, initiated_at, last_activity_at) VALUES (@id, @path, @permissions, @initiatedAt, @initiatedAt)",
    );
    this.#getUpload = db.prepare(`SELECT ${cols} FROM multipart_uploads WHERE id = ?`);
    this.#listUploads = db.prepare(`SELECT ${cols} FROM multipart_uploads ORDER BY initiated_at, id`);
    this.#countUploads = db.prepare("SELECT count(*) AS n FROM multipart_uploads").pluck();
    this.#deleteUpload = db.prepare("DELETE FROM multipart_uploads WHERE id = ?");
    this.#touch = db.prepare("UPDATE multipart_uploads SET last_activity_at = ? WHERE id = ?");
    this.#getPart = db.prepare(`SELECT ${partCols} FROM multipart_parts WHERE upload_id = ? AND part_number = ?`);
    this.#upsertPart = db.prepare(`
      INSERT INTO multipart_parts (upload_id, part_number, etag, size, file, offset, uploaded_at)
      VALUES (@uploadId, @partNumber, @etag, @size, @file, @offset, @uploadedAt)
      ON CONFLICT (upload_id, part_number) DO UPDATE SET etag = excluded.etag, size = excluded.size, file = excluded.file, offset = excluded.offset, uploaded_at = excluded.uploaded_at`);
    this.#setStride = db.prepare("UPDATE multipart_uploads SET stride = ? WHERE id = ? AND stride IS NULL");
    this.#listParts = db.prepare(`SELECT ${partCols} FROM multipart_parts WHERE upload_id = ? ORDER BY part_number`);
    this.#expired = db.prepare(`SELECT ${cols} FROM multipart_uploads WHERE last_activity_at <= ? ORDER BY last_activity_at`);
    // Recording a part and learning which file it replaced is one transaction,
    // so two uploads of the same part number can never disagree with the row.
    this.#replacePart = db.transaction((uploadId: string, part: PartRow): PartRow | undefined => {
      const previous = this.#getPart.get(uploadId, part.partNumber) as PartRow | undefined;
      this.#upsertPart.run({ uploadId, ...part });
      this.#touch.run(part.uploadedAt, uploadId);
      // Part 1 fixes the stride (the SDK and S3 clients use equal parts but the last).
      if (part.partNumber === 1 && part.size > 0) this.#setStride.run(part.size, uploadId);
      return previous;
    });
  }

  insert(upload: Omit<UploadRow, "lastActivityAt" | "stride">): void {
    this.#insertUpload.run(upload);
  }

  get(id: string): UploadRow | undefined {
    return this.#getUpload.get(id) as UploadRow | undefined;
  }

  list(): UploadRow[] {
    return this.#listUploads.all() as UploadRow[];
  }

  count(): number {
    return this.#countUploads.get() as number;
  }

  delete(id: string): void {
    this.#deleteUpload.run(id);
  }

  /** Records a part; returns the part it replaced, if any. */
  recordPart(uploadId: string, part: PartRow): PartRow | undefined {
    return this.#replacePart(uploadId, part);
  }

  part(uploadId: string, partNumber: number): PartRow | undefined {
    return this.#getPart.get(uploadId, partNumber) as PartRow | undefined;
  }

  parts(uploadId: string): PartRow[] {
    return this.#listParts.all(uploadId) as PartRow[];
  }

  idleSince(cutoff: number): UploadRow[] {
    return this.#expired.all(cutoff) as UploadRow[];
  }
}
