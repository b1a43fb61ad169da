import { describe, expect, it } from "vitest";
import { executionState, newRunTasks, runState, tail, type RunRecord } from "../../../simulator/jobs/run-state.js";

/** The status of an execution that ran for real follows its tasks (pure). */
const plan = { createdMs: 1_000, tasks: [], parallelism: 1, timeoutMs: 0 };
const run = (tasks: RunRecord["tasks"], startedMs?: number): RunRecord => ({
  dataToken: "t",
  command: "true",
  maxRetries: 0,
  by: { sub: "u", type: "user", scopes: [] },
  startedMs,
  tasks,
});

describe("runState", () => {
  it("queued before the runner starts, pending until a task starts, running, then the tasks' verdict", () => {
    expect(runState(plan, run(newRunTasks(2))).status).toBe("queued");
    expect(runState(plan, run(newRunTasks(2), 2_000)).status).toBe("pending");
    expect(
      runState(
        plan,
        run(
          [
            { index: 0, status: "running", attempts: 1, startMs: 2_000 },
            { index: 1, status: "pending", attempts: 0 },
          ],
          2_000,
        ),
      ).status,
    ).toBe("running");
    const ok = runState(plan, run([{ index: 0, status: "succeeded", attempts: 2, startMs: 2_000, endMs: 3_000 }], 2_000));
    expect(ok).toMatchObject({ status: "succeeded", completedMs: 3_000, stats: { total: 1, success: 1, retried: 1 } });
    expect(
      runState(
        plan,
        run(
          [
            { index: 0, status: "succeeded", attempts: 1 },
            { index: 1, status: "failed", attempts: 1 },
          ],
          2_000,
        ),
      ).status,
    ).toBe("failed");
    expect(runState(plan, run([{ index: 0, status: "failed", attempts: 1, timedOut: true }], 2_000)).status).toBe("timeout");
  });

  it("cancelling until every task ended, then cancelled", () => {
    const cancelled = { ...plan, cancelMs: 2_500 };
    expect(runState(cancelled, run([{ index: 0, status: "running", attempts: 1 }], 2_000)).status).toBe("cancelling");
    expect(runState(cancelled, run([{ index: 0, status: "cancelled", attempts: 1, startMs: 2_000, endMs: 2_600 }], 2_000))).toMatchObject({
      status: "cancelled",
      completedMs: 2_600,
    });
  });

  it("without a run record the simulated plan decides", () => {
    expect(executionState({ __plan: { ...plan, tasks: [{ durationMs: 10, fail: false }] } }, 0).status).toBe("queued");
  });

  it("tail keeps the end of long output", () => {
    expect(tail("abcdef", 3)).toBe("def");
    expect(tail(undefined)).toBe("");
  });
});
