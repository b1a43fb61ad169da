import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
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
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (id TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
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
