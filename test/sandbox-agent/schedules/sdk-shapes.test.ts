import type { SandboxScheduleEntry, SandboxScheduleExecution } from "@blaxel/core";
import { describe, expect, it } from "vitest";
import { presentExecution, presentSchedule } from "../../../sandbox-agent/schedules/present.js";
import type { ExecutionRow, ScheduleRow } from "../../../sandbox-agent/schedules/schedule-store.js";

// Compile-time: the agent's shapes are supersets of @blaxel/core's. An
// execution's status adds "running" and "skipped" to the SDK's two values
// (the agent records the process outcome, not only the submission).
type Entry = ReturnType<typeof presentSchedule>;
type Execution = ReturnType<typeof presentExecution>;
const asEntry = (e: Entry): SandboxScheduleEntry => e;
const asExecution = (e: Execution): Omit<SandboxScheduleExecution, "status"> & { status: SandboxScheduleExecution["status"] | "running" | "skipped" } => e;

const schedule: ScheduleRow = {
  seq: 1,
  id: "s",
  sandbox: "sbx",
  type: "cron",
  value: "0 3 * * *",
  timezone: "UTC",
  concurrency_policy: "Forbid",
  input: JSON.stringify({ command: "true", env: { K: "v" }, keepAlive: true, timeout: 600 }),
  max_executions: 100,
  created_at: 0,
  updated_at: 0,
  next_due_at: 1,
  last_due_at: null,
};
const execution: ExecutionRow = {
  seq: 1,
  id: "e",
  schedule_id: "s",
  sandbox: "sbx",
  trigger: "schedule",
  due_at: 0,
  created_at: 0,
  executed_at: 0,
  completed_at: null,
  status: "running",
  status_code: 200,
  exit_code: null,
  process_name: "p",
  timeout: 600,
  error: "",
  output: "",
};

describe("wire shapes against @blaxel/core's types", () => {
  it("carry every field of SandboxScheduleEntry and SandboxScheduleExecution", () => {
    const entry = asEntry(presentSchedule(schedule, false));
    expect(Object.keys(entry)).toEqual(expect.arrayContaining(["id", "type", "value", "input", "maxExecutions", "sandbox", "createdAt"]));
    expect(Object.keys(entry.input!)).toEqual(expect.arrayContaining(["command", "env", "keepAlive", "name", "timeout", "workingDir"]));
    const exec = asExecution(presentExecution(execution));
    expect(Object.keys(exec)).toEqual(
      expect.arrayContaining(["id", "scheduleId", "sandbox", "createdAt", "executedAt", "status", "statusCode", "processName", "timeout", "error"]),
    );
  });
});
