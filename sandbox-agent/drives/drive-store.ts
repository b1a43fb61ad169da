import type { Db, Migration } from "../../src/sqlite.js";
import type { BackendName } from "./backends/types.js";

/**
 * The agent's own record of each drive it attached. A record alone never
 * makes a drive "mounted": the service joins it with the kernel's mount
 * table, so the list is right after a restart (kill -9 included) and never
 * shows a mount that is gone. The record supplies what the table cannot:
 * the drive name and path, the sandbox path the client used, and which
 * directories the agent created (and so may remove).
 */
export const DRIVE_MIGRATIONS: Migration[] = [
  {
    id: "drives/001-mounts",
    sql: `
      CREATE TABLE drive_mounts (
        host_path    TEXT PRIMARY KEY,
        sandbox_path TEXT NOT NULL,
        drive_name   TEXT NOT NULL,
        drive_path   TEXT NOT NULL,
        read_only    INTEGER NOT NULL,
        backend      TEXT NOT NULL,
        mount_id     INTEGER,
        device       TEXT,
        link_target  TEXT,
        created_dir  TEXT,
        mounted_at   INTEGER NOT NULL
      );
    `,
  },
];

export interface DriveRecord {
  hostPath: string;
  sandboxPath: string;
  driveName: string;
  drivePath: string;
  readOnly: boolean;
  backend: BackendName;
  /** Kernel mount id and device from mountinfo, to recognise our mount (table-backed backends). */
  mountId: number | null;
  device: string | null;
  /** The symlink backend's target. */
  linkTarget: string | null;
  /** The topmost directory the agent created for the mount point, removed on unmount. */
  createdDir: string | null;
  mountedAt: number;
}

interface Row extends Omit<DriveRecord, "readOnly"> {
  readOnly: number;
}

const COLS = `host_path AS hostPath, sandbox_path AS sandboxPath, drive_name AS driveName, drive_path AS drivePath,
  read_only AS readOnly, backend, mount_id AS mountId, device, link_target AS linkTarget, created_dir AS createdDir, mounted_at AS mountedAt`;

export class DriveStore {
  readonly #put;
  readonly #get;
  readonly #all;
  readonly #delete;

  constructor(db: Db) {
    this.#put = db.prepare(`
      INSERT OR REPLACE INTO drive_mounts (host_path, sandbox_path, drive_name, drive_path, read_only, backend, mount_id, device, link_target, created_dir, mounted_at)
      VALUES (@hostPath, @sandboxPath, @driveName, @drivePath, @readOnly, @backend, @mountId, @device, @linkTarget, @createdDir, @mountedAt)`);
    this.#get = db.prepare(`SELECT ${COLS} FROM drive_mounts WHERE host_path = ?`);
    this.#all = db.prepare(`SELECT ${COLS} FROM drive_mounts ORDER BY sandbox_path`);
    this.#delete = db.prepare("DELETE FROM drive_mounts WHERE host_path = ?");
  }

  put(record: DriveRecord): void {
    this.#put.run({ ...record, readOnly: record.readOnly ? 1 : 0 });
  }

  get(hostPath: string): DriveRecord | undefined {
    const row = this.#get.get(hostPath) as Row | undefined;
    return row && fromRow(row);
  }

  all(): DriveRecord[] {
    return (this.#all.all() as Row[]).map(fromRow);
  }

  delete(hostPath: string): void {
    this.#delete.run(hostPath);
  }
}

function fromRow(row: Row): DriveRecord {
  return { ...row, readOnly: row.readOnly === 1 };
}
