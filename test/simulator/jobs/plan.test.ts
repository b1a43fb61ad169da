import { describe, expect, it } from "vitest";
import { stateAt, type ExecutionPlan } from "../../../simulator/jobs/plan.js";

const plan = (over: Partial<ExecutionPlan> = {}): ExecutionPlan => ({
  createdMs: 0,
  tasks: [
    { durationMs: 1000, fail: false },
    { durationMs: 1000, fail: false },
  ],
  parallelism: 1,
  timeoutMs: 0,
  ...over,
});

describe("job execution state as a function of time", () => {
  it("goes queued → pending → running → succeeded, one task at a time", () => {
    expect(stateAt(plan(), 100).status).toBe("queued");
    expect(stateAt(plan(), 300).status).toBe("pending");
    const running = stateAt(plan(), 600);
    expect(running.status).toBe("running");
    expect(running.tasks.map((t) => t.status)).toEqual(["running", "pending"]);
    const done = stateAt(plan(), 2600);
    expect(done.status).toBe("succeeded");
    expect(done.completedMs).toBe(2500);
    expect(done.stats).toEqual({ total: 2, running: 0, success: 2, failure: 0, cancelled: 0, retried: 0 });
  });

  it("runs tasks in parallel up to the parallelism", () => {
    expect(stateAt(plan({ parallelism: 2 }), 600).stats.running).toBe(2);
    expect(stateAt(plan({ parallelism: 2 }), 1500).status).toBe("succeeded");
  });

  it("on cancel lets the running task finish and starts no other", () => {
    const cancelled = plan({ cancelMs: 700 });
    expect(stateAt(cancelled, 800).status).toBe("cancelling");
    const end = stateAt(cancelled, 5000);
    expect(end.status).toBe("cancelled");
    expect(end.tasks.map((t) => t.status)).toEqual(["succeeded", "cancelled"]);
  });

  it("cancelled before it starts: cancelled at once", () => {
    expect(stateAt(plan({ cancelMs: 100 }), 150).status).toBe("cancelled");
  });

  it("reports failed tasks and timeouts", () => {
    expect(stateAt(plan({ tasks: [{ durationMs: 10, fail: true }] }), 1000).status).toBe("failed");
    const timeout = stateAt(plan({ tasks: [{ durationMs: 60_000, fail: false }], timeoutMs: 2000 }), 3000);
    expect(timeout.status).toBe("timeout");
    expect(timeout.tasks[0]!.timedOut).toBe(true);
  });
});
