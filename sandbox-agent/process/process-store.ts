import type { Db, Migration } from "../../src/sqlite.js";

/**
 * Process records live in SQLite so they survive an agent restart (kill -9
 * included). `id` is internal (log file names, row key): OS pids are reused
 * and names repeat, so neither can be the key.
 */
export const PROCESS_MIGRATIONS: Migration[] = [
  {
    id: "process/001-processes",
    sql: `
      CREATE TABLE processes (
        id             TEXT PRIMARY KEY,
        pid            INTEGER NOT NULL,
        name           TEXT NOT NULL,
        command        TEXT NOT NULL,
        status         TEXT NOT NULL,
        exit_code      INTEGER,
        error          TEXT,
        started_at     INTEGER NOT NULL,
        completed_at   INTEGER,
        working_dir    TEXT NOT NULL,
        keep_alive     INTEGER NOT NULL,
        timeout        INTEGER NOT NULL,
        proc_start     TEXT,
        stdout_dropped INTEGER NOT NULL DEFAULT 0,
        stderr_dropped INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX processes_by_name ON processes (name, started_at);
      CREATE INDEX processes_by_pid ON processes (pid, started_at);
      CREATE INDEX processes_finished ON processes (status, completed_at);
    `,
  },
  {
    // timeout stops killing (reference §4.2): kill_after carries the kill timer; rows started before keep theirs.
    id: "process/002-restarts-stdin-kill-after",
    sql: `
      ALTER TABLE processes ADD COLUMN run_pid INTEGER;
      ALTER TABLE processes ADD COLUMN kill_after INTEGER NOT NULL DEFAULT 0;
      UPDATE processes SET kill_after = timeout;
      ALTER TABLE processes ADD COLUMN restart_on_failure INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE processes ADD COLUMN max_restarts INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE processes ADD COLUMN restart_count INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE processes ADD COLUMN stdin INTEGER NOT NULL DEFAULT 0;
    `,
  },
];

export type ProcessStatus = "running" | "completed" | "failed" | "killed" | "stopped";

export interface ProcessRow {
  id: string;
  /** The pid of the first run: what clients know the process by (reference: it stays after restarts). */
  pid: number;
  /** The OS pid of the current run (differs from `pid` after a restart): signals and sockets go by it. */
  runPid: number;
  name: string;
  command: string;
  status: ProcessStatus;
  exitCode: number | null;
  error: string | null;
  startedAt: number;
  completedAt: number | null;
  workingDir: string;
  keepAlive: boolean;
  /** Seconds the HTTP caller's waits were bounded by (recorded, never kills). */
  timeout: number;
  /** Seconds after which the process group is killed; 0 = never (keepAlive with a timeout, schedules). */
  killAfter: number;
  restartOnFailure: boolean;
  /** Negative = unlimited. */
  maxRestarts: number;
  restartCount: number;
  /** Started with a stdin pipe. */
  stdin: boolean;
  /** Kernel start time of the pid (Linux /proc), to tell our process from a reused pid. */
  procStart: string | null;
  stdoutDropped: number;
  stderrDropped: number;
}

type Flag = "keepAlive" | "restartOnFailure" | "stdin";
type RawRow = Omit<ProcessRow, Flag> & Record<Flag, number>;

const COLS = `id, pid, name, command, status, exit_code AS exitCode, error, started_at AS startedAt,
  completed_at AS completedAt, working_dir AS workingDir, keep_alive AS keepAlive, timeout,
  proc_start AS procStart, stdout_dropped AS stdoutDropped, stderr_dropped AS stderrDropped,
  COALESCE(run_pid, pid) AS runPid, kill_after AS killAfter, restart_on_failure AS restartOnFailure,
  max_restarts AS maxRestarts, restart_count AS restartCount, stdin`;

function fromRaw(raw: RawRow | undefined): ProcessRow | undefined {
  return raw && { ...raw, keepAlive: raw.keepAlive === 1, restartOnFailure: raw.restartOnFailure === 1, stdin: raw.stdin === 1 };
}

export class ProcessStore {
  readonly #insert;
  readonly #byId;
  readonly #byPid;
  readonly #byName;
  readonly #runningByName;
  readonly #all;
  readonly #running;
  readonly #finish;
  readonly #dropped;
  readonly #oldFinished;
  readonly #delete;
  readonly #restarted;
  readonly #restartCount;

  constructor(db: Db) {
    this.#insert = db.prepare(`INSERT INTO processes (id, pid, name, command, status, exit_code, error, started_at,
      completed_at, working_dir, keep_alive, timeout, proc_start, stdout_dropped, stderr_dropped,
      run_pid, kill_after, restart_on_failure, max_restarts, restart_count, stdin)
      VALUES (@id, @pid, @name, @command, @status, @exitCode, @error, @startedAt, @completedAt, @workingDir,
      @keepAlive, @timeout, @procStart, @stdoutDropped, @stderrDropped,
      @runPid, @killAfter, @restartOnFailure, @maxRestarts, @restartCount, @stdin)`);
    this.#restartCount = db.prepare(`UPDATE processes SET restart_count = ? WHERE id = ?`);
    this.#restarted = db.prepare(`UPDATE processes SET run_pid = @runPid, proc_start = @procStart, started_at = @startedAt,
      restart_count = @restartCount WHERE id = @id AND status = 'running'`);
    this.#byId = db.prepare(`SELECT ${COLS} FROM processes WHERE id = ?`);
    this.#byPid = db.prepare(`SELECT ${COLS} FROM processes WHERE pid = ? ORDER BY started_at DESC, rowid DESC LIMIT 1`);
    this.#byName = db.prepare(`SELECT ${COLS} FROM processes WHERE name = ? ORDER BY started_at DESC, rowid DESC LIMIT 1`);
    this.#runningByName = db.prepare(`SELECT ${COLS} FROM processes WHERE name = ? AND status = 'running' LIMIT 1`);
    this.#all = db.prepare(`SELECT ${COLS} FROM processes ORDER BY started_at, rowid`);
    this.#running = db.prepare(`SELECT ${COLS} FROM processes WHERE status = 'running'`);
    this.#finish = db.prepare(`UPDATE processes SET status = @status, exit_code = @exitCode, error = @error,
      completed_at = @completedAt WHERE id = @id AND status = 'running'`);
    this.#dropped = db.prepare(`UPDATE processes SET stdout_dropped = @stdoutDropped, stderr_dropped = @stderrDropped WHERE id = @id`);
    this.#oldFinished = db.prepare(`SELECT id FROM processes WHERE status != 'running'
      ORDER BY completed_at DESC, rowid DESC LIMIT -1 OFFSET ?`);
    this.#delete = db.prepare(`DELETE FROM processes WHERE id = ?`);
  }

  insert(row: ProcessRow): void {
    this.#insert.run({ ...row, keepAlive: row.keepAlive ? 1 : 0, restartOnFailure: row.restartOnFailure ? 1 : 0, stdin: row.stdin ? 1 : 0 });
  }

  /** A restart is decided (the run follows after a pause): counted at once, so readers see it. */
  countRestart(id: string, restartCount: number): void {
    this.#restartCount.run(restartCount, id);
  }

  /** A new run of a process that failed and is restarted in place (its public pid stays). */
  restarted(id: string, run: { runPid: number; procStart: string | null; startedAt: number; restartCount: number }): void {
    this.#restarted.run({ id, ...run });
  }

  byId(id: string): ProcessRow | undefined {
    return fromRaw(this.#byId.get(id) as RawRow | undefined);
  }

  /** The latest process with this pid (pids are reused over time). */
  byPid(pid: number): ProcessRow | undefined {
    return fromRaw(this.#byPid.get(pid) as RawRow | undefined);
  }

  /** The latest process with this name. */
  byName(name: string): ProcessRow | undefined {
    return fromRaw(this.#byName.get(name) as RawRow | undefined);
  }

  runningByName(name: string): ProcessRow | undefined {
    return fromRaw(this.#runningByName.get(name) as RawRow | undefined);
  }

  all(): ProcessRow[] {
    return (this.#all.all() as RawRow[]).map((r) => fromRaw(r)!);
  }

  running(): ProcessRow[] {
    return (this.#running.all() as RawRow[]).map((r) => fromRaw(r)!);
  }

  /** Records the end of a running process; false if it had already ended. */
  finish(id: string, end: { status: ProcessStatus; exitCode: number | null; error: string | null; completedAt: number }): boolean {
    return this.#finish.run({ id, ...end }).changes === 1;
  }

  setDropped(id: string, stdoutDropped: number, stderrDropped: number): void {
    this.#dropped.run({ id, stdoutDropped, stderrDropped });
  }

  /** Ids of finished processes beyond the newest `keep`, oldest last. */
  finishedBeyond(keep: number): string[] {
    return (this.#oldFinished.all(keep) as { id: string }[]).map((r) => r.id);
  }

  delete(id: string): void {
    this.#delete.run(id);
  }
}
