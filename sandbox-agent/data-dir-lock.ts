import Database from "better-sqlite3";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** A second agent on a data dir in use: main prints the message alone and exits 1. */
export class DataDirLockedError extends Error {
  override name = "DataDirLockedError";
}

const LOCK_FILE = "agent.lock";
const PID_FILE = "agent.pid";

/**
 * One data dir, one agent: two schedulers on one database
 * would fire every schedule twice. The lock is SQLite's own, an fcntl lock
 * held for the life of a connection in EXCLUSIVE locking mode: the kernel
 * drops it when the process dies, kill -9 included, so a stale lock cannot
 * outlive its agent, and a live one cannot be taken over. The pid file is
 * only for the message.
 */
export function lockDataDir(dataDir: string): { release(): void } {
  const db = new Database(join(dataDir, LOCK_FILE));
  try {
    db.pragma("busy_timeout = 0");
    // The file holds nothing worth keeping, only the lock: no journal on disk and no fsync, which on a fresh
    // data dir cost a start 30-180 ms of waiting for the disk (three writes, each journalled and synced).
    db.pragma("synchronous = OFF");
    db.pragma("journal_mode = MEMORY");
    db.pragma("locking_mode = EXCLUSIVE");
    // A write takes the exclusive lock, and EXCLUSIVE mode keeps it after the commit.
    db.exec("CREATE TABLE IF NOT EXISTS held (at INTEGER); DELETE FROM held; INSERT INTO held VALUES (0)");
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code !== "SQLITE_BUSY") throw err;
    let holder = "";
    try {
      holder = ` (pid ${readFileSync(join(dataDir, PID_FILE), "utf8").trim()})`;
    } catch {
      /* no pid file: an older agent */
    }
    throw new DataDirLockedError(`another sandbox-agent${holder} is already running on --data-dir ${dataDir}; stop it first (one data dir, one agent)`);
  }
  writeFileSync(join(dataDir, PID_FILE), `${process.pid}\n`);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      db.close();
    },
  };
}
