import type { Migration } from "../../src/sqlite.js";

/**
 * The schedules' tables in the agent's SQLite database (their migrations), their rows as the store reads and
 * writes them, and the columns it selects. The store itself is schedule-store.ts.
 */
export const SCHEDULE_MIGRATIONS: readonly Migration[] = [
  {
    id: "schedules/001-init",
    sql: `
      CREATE TABLE schedules (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        sandbox TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('cron', 'at')),
        value TEXT NOT NULL,
        timezone TEXT NOT NULL,
        concurrency_policy TEXT NOT NULL,
        input TEXT NOT NULL,
        max_executions INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        next_due_at INTEGER,
        last_due_at INTEGER
      );
      CREATE TABLE schedule_executions (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL,
        schedule_id TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
        sandbox TEXT NOT NULL,
        trigger TEXT NOT NULL,
        due_at INTEGER,
        created_at INTEGER NOT NULL,
        executed_at INTEGER,
        completed_at INTEGER,
        status TEXT NOT NULL,
        status_code INTEGER,
        exit_code INTEGER,
        process_name TEXT,
        timeout INTEGER NOT NULL,
        error TEXT NOT NULL DEFAULT '',
        output TEXT NOT NULL DEFAULT ''
      );
      -- The only index: every page a record touches is one more page in the
      -- commit. Executions are addressed by seq; their ids (UUIDv7) are unique
      -- by construction; runs in progress are tracked in memory (runs.ts).
      CREATE INDEX schedule_executions_by_schedule ON schedule_executions (schedule_id, seq);
    `,
  },
  {
    // A one-off `at` is deleted once it has fired (the platform's rule: the SDK's "fires a one-off at schedule
    // (auto-deletes after firing)"), while its executions stay readable: the row is kept, retired, out of every
    // schedule route, until its id is reused or RETIRED_KEPT newer ones push it (and its history) out.
    id: "schedules/002-retired",
    sql: `
      ALTER TABLE schedules ADD COLUMN retired_at INTEGER;
      UPDATE schedules SET retired_at = COALESCE(last_due_at, updated_at) WHERE type = 'at' AND next_due_at IS NULL;
      CREATE INDEX schedules_retired ON schedules (retired_at) WHERE retired_at IS NOT NULL;
    `,
  },
];

/** Fired one-offs whose execution history is kept; the oldest beyond this go, history and all. */
export const RETIRED_KEPT = 1_000;

export interface ScheduleRow {
  seq: number;
  id: string;
  sandbox: string;
  type: "cron" | "at";
  value: string;
  timezone: string;
  concurrency_policy: "Forbid" | "Allow" | "Replace";
  input: string;
  max_executions: number;
  created_at: number;
  updated_at: number;
  next_due_at: number | null;
  last_due_at: number | null;
}

export type ExecutionStatus = "running" | "succeeded" | "failed" | "skipped";
export type ExecutionTrigger = "schedule" | "catch-up" | "manual";

export interface ExecutionRow {
  seq: number;
  id: string;
  schedule_id: string;
  sandbox: string;
  trigger: ExecutionTrigger;
  due_at: number | null;
  created_at: number;
  executed_at: number | null;
  completed_at: number | null;
  status: ExecutionStatus;
  status_code: number | null;
  exit_code: number | null;
  process_name: string | null;
  timeout: number;
  error: string;
  output: string;
}

export type NewExecution = Omit<ExecutionRow, "seq">;
export type ExecutionPatch = Partial<Pick<ExecutionRow, "executed_at" | "completed_at" | "status" | "status_code" | "exit_code" | "error" | "output">>;

export interface ListQuery {
  sort: "asc" | "desc";
  /** seq of the last row of the previous page. */
  after?: number;
  limit: number;
}

export const SCHEDULE_COLUMNS =
  "id, sandbox, type, value, timezone, concurrency_policy, input, max_executions, created_at, updated_at, next_due_at, last_due_at";
export const EXECUTION_COLUMNS =
  "id, schedule_id, sandbox, trigger, due_at, created_at, executed_at, completed_at, status, status_code, exit_code, process_name, timeout, error, output";
export const PATCHABLE = ["executed_at", "completed_at", "status", "status_code", "exit_code", "error", "output"] as const;
