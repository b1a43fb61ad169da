import Database from "better-sqlite3";
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";

export type Db = Database.Database;

export interface Migration {
  /** Unique and stable, e.g. `multipart/001-uploads`. Applied once, in list order. */
  id: string;
  sql: string;
}

/**
 * Opens (or creates) a database in WAL mode. `:memory:` gives a private
 * in-memory database with the same code path.
 *
 * synchronous=NORMAL in WAL mode: a committed transaction survives a crash of
 * the process (kill -9); only an OS crash or power loss can lose the last few.
 */
export function openDatabase(file: string): Db {
  if (file !== ":memory:") mkdirSync(dirname(file), { recursive: true });
  const fresh = file === ":memory:" || !existsSync(file);
  const db = new Database(file);
  // A new file is set up unsynced (its switch to WAL and first table): nothing is in it yet that an OS crash could
  // lose, and each sandbox's agent creates one at its start, where the syncs cost 20-40 ms of waiting for the disk.
  if (fresh) db.pragma("synchronous = OFF");
  db.pragma("journal_mode = WAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (id TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
  db.pragma("synchronous = NORMAL");
  return db;
}

/** Applies the migrations not yet recorded, each in its own transaction. */
export function migrate(db: Db, migrations: readonly Migration[]): void {
  const applied = new Set((db.prepare("SELECT id FROM schema_migrations").all() as { id: string }[]).map((r) => r.id));
  const record = db.prepare("INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)");
  for (const m of migrations) {
    if (applied.has(m.id)) continue;
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.id, new Date().toISOString());
    })();
  }
}
