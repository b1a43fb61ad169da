import type { Db } from "../../src/sqlite.js";
import type { Statement } from "better-sqlite3";
import { hasClearEnv, openInput, sealInput, type SecretBox } from "./sealed-env.js";
import {
  EXECUTION_COLUMNS,
  PATCHABLE,
  RETIRED_KEPT,
  SCHEDULE_COLUMNS,
  type ExecutionPatch,
  type ExecutionRow,
  type ExecutionStatus,
  type ListQuery,
  type NewExecution,
  type ScheduleRow,
} from "./schema.js";

/** The tables and rows (schema.ts), importable from here as before. */
export {
  RETIRED_KEPT,
  SCHEDULE_MIGRATIONS,
  type ExecutionPatch,
  type ExecutionRow,
  type ExecutionStatus,
  type ExecutionTrigger,
  type ListQuery,
  type NewExecution,
  type ScheduleRow,
} from "./schema.js";

/**
 * Schedules and their execution records in the agent's SQLite database.
 * Statements are prepared once. Retention lives here: recording an execution
 * and deleting the oldest beyond the schedule's maxExecutions happen in the
 * same transaction, so the count never exceeds the limit, whoever records.
 */
export class ScheduleStore {
  readonly #db: Db;
  readonly #s: Record<string, Statement>;
  readonly #lists = new Map<string, Statement>();
  /** Execution records per schedule, see #trim. */
  readonly #counts = new Map<string, number>();

  readonly #box: SecretBox | undefined;

  /** `box` seals `input.env` at rest; rows come back opened. Rows stored in clear are sealed here, once. */
  constructor(db: Db, box?: SecretBox) {
    this.#db = db;
    this.#box = box;
    const named = (cols: string) =>
      cols
        .split(", ")
        .map((c) => `@${c}`)
        .join(", ");
    this.#s = {
      insertSchedule: db.prepare(`INSERT INTO schedules (${SCHEDULE_COLUMNS}) VALUES (${named(SCHEDULE_COLUMNS)})`),
      replaceSchedule: db.prepare(
        `UPDATE schedules SET type = @type, value = @value, timezone = @timezone, concurrency_policy = @concurrency_policy, input = @input,
         max_executions = @max_executions, updated_at = @updated_at, next_due_at = @next_due_at, last_due_at = @last_due_at WHERE id = @id`,
      ),
      getSchedule: db.prepare("SELECT * FROM schedules WHERE id = ? AND retired_at IS NULL"),
      deleteSchedule: db.prepare("DELETE FROM schedules WHERE id = ?"),
      retire: db.prepare("UPDATE schedules SET retired_at = @at, next_due_at = NULL, last_due_at = @lastDueAt WHERE id = @id"),
      purgeRetired: db.prepare("DELETE FROM schedules WHERE id = ? AND retired_at IS NOT NULL"),
      isRetired: db.prepare("SELECT 1 FROM schedules WHERE id = ? AND retired_at IS NOT NULL"),
      countRetired: db.prepare("SELECT COUNT(*) AS n FROM schedules WHERE retired_at IS NOT NULL"),
      oldestRetired: db.prepare("SELECT id FROM schedules WHERE retired_at IS NOT NULL ORDER BY retired_at, seq LIMIT ?"),
      armed: db.prepare("SELECT * FROM schedules WHERE next_due_at IS NOT NULL"),
      setDue: db.prepare("UPDATE schedules SET next_due_at = ?, last_due_at = ? WHERE id = ?"),
      insertExecution: db.prepare(`INSERT INTO schedule_executions (${EXECUTION_COLUMNS}) VALUES (${named(EXECUTION_COLUMNS)})`),
      countExecutions: db.prepare("SELECT COUNT(*) AS n FROM schedule_executions WHERE schedule_id = ?"),
      deleteOldest: db.prepare("DELETE FROM schedule_executions WHERE seq IN (SELECT seq FROM schedule_executions WHERE schedule_id = ? ORDER BY seq LIMIT ?)"),
      getExecution: db.prepare("SELECT * FROM schedule_executions WHERE seq = ?"),
      failRunning: db.prepare("UPDATE schedule_executions SET status = 'failed', error = ?, completed_at = ? WHERE status = 'running'"),
    };
    this.#recordTx = db.transaction(this.#insertAndTrim);
    if (box) this.#sealClearRows(db);
  }

  #sealClearRows(db: Db): void {
    const rows = db.prepare("SELECT id, input FROM schedules").all() as { id: string; input: string }[];
    const update = db.prepare("UPDATE schedules SET input = ? WHERE id = ?");
    db.transaction(() => {
      for (const row of rows) if (hasClearEnv(row.input)) update.run(sealInput(this.#box, row.input), row.id);
    })();
  }

  #opened = <T extends ScheduleRow | undefined>(row: T): T => (row ? { ...row, input: openInput(this.#box, row.input) } : row);

  /** Runs `fn` in a transaction, or inside the one already open (no savepoint: nothing here needs a partial rollback). */
  transaction<T>(fn: () => T): T {
    if (this.#db.inTransaction) return fn();
    try {
      return this.#db.transaction(fn)();
    } catch (err) {
      this.#counts.clear(); // rolled back: recount lazily
      throw err;
    }
  }

  /** Inserts a schedule; a retired one-off of the same id goes first, with its history (the id is the user's again). */
  insertSchedule(row: Omit<ScheduleRow, "seq">): void {
    this.transaction(() => {
      if (this.#s.purgeRetired!.run(row.id).changes > 0) this.#counts.delete(row.id);
      this.#s.insertSchedule!.run({ ...row, input: sealInput(this.#box, row.input) });
    });
  }

  isRetired(id: string): boolean {
    return this.#s.isRetired!.get(id) !== undefined;
  }

  /**
   * A one-off that fired leaves every schedule route (as deleted); its executions stay listable. Keeps the
   * RETIRED_KEPT newest retired ones, so a sandbox firing one-offs all day holds a bounded history.
   */
  retire(id: string, at: number, lastDueAt: number): void {
    this.#s.retire!.run({ id, at, lastDueAt });
    const { n } = this.#s.countRetired!.get() as { n: number };
    if (n <= RETIRED_KEPT) return;
    for (const { id: old } of this.#s.oldestRetired!.all(n - RETIRED_KEPT) as { id: string }[]) {
      this.#s.deleteSchedule!.run(old);
      this.#counts.delete(old);
    }
  }

  /** Replaces a schedule's definition and trims its history to the new maxExecutions. */
  replaceSchedule(row: Omit<ScheduleRow, "seq" | "sandbox" | "created_at">): void {
    this.transaction(() => {
      this.#s.replaceSchedule!.run({ ...row, input: sealInput(this.#box, row.input) });
      this.#trim(row.id, row.max_executions);
    });
  }

  getSchedule(id: string): ScheduleRow | undefined {
    return this.#opened(this.#s.getSchedule!.get(id) as ScheduleRow | undefined);
  }

  /** Deletes a schedule and (cascade) its executions; returns what was deleted. */
  deleteSchedule(id: string): ScheduleRow | undefined {
    return this.transaction(() => {
      const row = this.getSchedule(id);
      if (row) this.#s.deleteSchedule!.run(id);
      this.#counts.delete(id);
      return row;
    });
  }

  /** Schedules that still have a next due time (everything but fired one-offs). */
  armedSchedules(): ScheduleRow[] {
    return (this.#s.armed!.all() as ScheduleRow[]).map(this.#opened);
  }

  setDue(id: string, nextDueAt: number | null, lastDueAt: number | null): void {
    this.#s.setDue!.run(nextDueAt, lastDueAt, id);
  }

  /** Inserts an execution and deletes the oldest beyond `maxExecutions`, atomically; returns its seq. */
  recordExecution(execution: NewExecution, maxExecutions: number): number {
    if (this.#db.inTransaction) return this.#insertAndTrim(execution, maxExecutions);
    try {
      return this.#recordTx(execution, maxExecutions);
    } catch (err) {
      this.#counts.clear();
      throw err;
    }
  }

  #insertAndTrim = (execution: NewExecution, maxExecutions: number): number => {
    const seq = Number(this.#s.insertExecution!.run(execution).lastInsertRowid);
    this.#trim(execution.schedule_id, maxExecutions, 1);
    return seq;
  };

  readonly #recordTx: (execution: NewExecution, maxExecutions: number) => number;

  /**
   * Deletes the oldest records beyond `maxExecutions`. The count per schedule
   * is kept in memory (counted once, then maintained: this store is the only
   * writer), so a record below the limit costs no query and one above it
   * exactly one delete.
   */
  #trim(scheduleId: string, maxExecutions: number, inserted = 0): void {
    let n = this.#counts.get(scheduleId);
    if (n === undefined) n = (this.#s.countExecutions!.get(scheduleId) as { n: number }).n;
    else n += inserted;
    if (n > maxExecutions) {
      n -= this.#s.deleteOldest!.run(scheduleId, n - maxExecutions).changes;
    }
    this.#counts.set(scheduleId, n);
  }

  getExecution(seq: number): ExecutionRow | undefined {
    return this.#s.getExecution!.get(seq) as ExecutionRow | undefined;
  }

  /**
   * Patches an execution; a no-op when retention (or a delete) already removed
   * it. `onlyIfRunning` settles a run once: a run marked replaced or failed at
   * start-up is not overwritten when its process finally reports.
   */
  updateExecution(seq: number, patch: ExecutionPatch, onlyIfRunning = false): boolean {
    const keys = PATCHABLE.filter((k) => patch[k] !== undefined);
    if (keys.length === 0) return false;
    const sql = `UPDATE schedule_executions SET ${keys.map((k) => `${k} = @${k}`).join(", ")} WHERE seq = @seq${onlyIfRunning ? " AND status = 'running'" : ""}`;
    const values: Record<string, unknown> = { seq };
    for (const k of keys) values[k] = patch[k];
    return this.#prepared(sql).run(values).changes > 0;
  }

  /** Start-up repair: executions left running by a dead agent become failed. */
  failRunning(error: string, now: number): number {
    return this.#s.failRunning!.run(error, now).changes;
  }

  listSchedules(filter: { type?: "cron" | "at" }, q: ListQuery): { rows: ScheduleRow[]; total: number } {
    const page = this.#list<ScheduleRow>("schedules", filter.type ? { type: filter.type } : {}, q, "retired_at IS NULL");
    return { ...page, rows: page.rows.map(this.#opened) };
  }

  listExecutions(filter: { schedule_id?: string; status?: ExecutionStatus }, q: ListQuery): { rows: ExecutionRow[]; total: number } {
    return this.#list<ExecutionRow>("schedule_executions", filter, q);
  }

  #list<T>(table: string, filter: Record<string, string | undefined>, q: ListQuery, always?: string): { rows: T[]; total: number } {
    const where = Object.keys(filter).filter((k) => filter[k] !== undefined);
    const params: Record<string, unknown> = Object.fromEntries(where.map((k) => [k, filter[k]]));
    const conditions = where.map((k) => `${k} = @${k}`);
    if (always) conditions.push(always);
    const countSql = `SELECT COUNT(*) AS n FROM ${table}${conditions.length ? ` WHERE ${conditions.join(" AND ")}` : ""}`;
    if (q.after !== undefined) conditions.push(q.sort === "desc" ? "seq < @after" : "seq > @after");
    const sql = `SELECT * FROM ${table}${conditions.length ? ` WHERE ${conditions.join(" AND ")}` : ""} ORDER BY seq ${q.sort === "desc" ? "DESC" : "ASC"} LIMIT @limit`;
    const rows = this.#prepared(sql).all({ ...params, after: q.after, limit: q.limit }) as T[];
    const { n } = this.#prepared(countSql).get(params) as { n: number };
    return { rows, total: n };
  }

  #prepared(sql: string): Statement {
    let stmt = this.#lists.get(sql);
    if (!stmt) this.#lists.set(sql, (stmt = this.#db.prepare(sql)));
    return stmt;
  }
}
