import { describe, expect, it } from "vitest";
import { DueQueue } from "../../../sandbox-agent/schedules/due-queue.js";
import { decideOverlap, firstDueAt, nextDueAfterFire } from "../../../sandbox-agent/schedules/due.js";

describe("DueQueue", () => {
  it("pops what is due in time order; rescheduled and removed ids are not popped at their old time", () => {
    const q = new DueQueue();
    q.set("a", 30);
    q.set("b", 10);
    q.set("c", 20);
    q.set("a", 5); // rescheduled earlier
    q.set("c", 50); // later
    q.set("b", null); // removed
    expect(q.peek()).toBe(5);
    expect(q.popDue(25)).toEqual([{ id: "a", at: 5 }]);
    expect(q.size).toBe(1);
    expect(q.popDue(49)).toEqual([]);
    expect(q.popDue(50)).toEqual([{ id: "c", at: 50 }]);
    expect(q.peek()).toBeUndefined();
  });

  it("stays correct under many reschedules (stale entries compacted)", () => {
    const q = new DueQueue();
    for (let round = 0; round < 50; round++) for (let i = 0; i < 200; i++) q.set(`s${i}`, 1_000 + ((i * 7919 + round * 104729) % 5_000));
    const popped = q.popDue(Infinity);
    expect(popped).toHaveLength(200);
    expect(popped.map((p) => p.at)).toEqual([...popped.map((p) => p.at)].sort((a, b) => a - b));
  });
});

describe("due rules", () => {
  const NOW = Date.parse("2026-01-01T00:00:30Z");

  it("first due time: the `at` itself, or the next cron occurrence after now", () => {
    expect(firstDueAt({ type: "at", value: "2026-01-02T00:00:00.000Z", timezone: "UTC" }, NOW)).toBe(Date.parse("2026-01-02T00:00:00Z"));
    expect(firstDueAt({ type: "cron", value: "* * * * *", timezone: "UTC" }, NOW)).toBe(Date.parse("2026-01-01T00:01:00Z"));
  });

  it("after a late firing, missed occurrences coalesce: the next one is after now; an `at` is done", () => {
    const cron = { type: "cron" as const, value: "*/5 * * * *", timezone: "UTC" };
    const due = Date.parse("2026-01-01T00:05:00Z");
    expect(nextDueAfterFire(cron, due, due + 12)).toBe(Date.parse("2026-01-01T00:10:00Z"));
    expect(nextDueAfterFire(cron, due, Date.parse("2026-01-01T03:02:00Z"))).toBe(Date.parse("2026-01-01T03:05:00Z"));
    expect(nextDueAfterFire({ type: "at", value: "x", timezone: "UTC" }, due, due)).toBeNull();
  });

  it("overlap decisions follow Kubernetes CronJob's concurrencyPolicy", () => {
    expect(decideOverlap("Forbid", 0)).toBe("start");
    expect(decideOverlap("Forbid", 1)).toBe("skip");
    expect(decideOverlap("Allow", 3)).toBe("start");
    expect(decideOverlap("Replace", 1)).toBe("replace");
  });
});
