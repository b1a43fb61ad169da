import { describe, expect, it } from "vitest";
import { parseRfc3339, resolveTiming } from "../../../sandbox-agent/schedules/timing.js";

// A Saturday.
const NOW = Date.parse("2026-03-07T10:00:00Z");

describe("resolveTiming", () => {
  it("normalises a cron expression and rejects a 6-field one", () => {
    expect(resolveTiming("cron", " 0  8 * * 1-5 ", "UTC", NOW)).toEqual({ type: "cron", value: "0 8 * * 1-5" });
    expect(() => resolveTiming("cron", "0 0 8 * * *", "UTC", NOW)).toThrow(/exactly 5 fields/);
  });

  it("stores an RFC 3339 `at` as UTC", () => {
    expect(resolveTiming("at", "2026-07-01T09:00:00+02:00", "UTC", NOW)).toEqual({ type: "at", value: "2026-07-01T07:00:00.000Z" });
  });

  it("rejects an `at` in the past, and impossible dates", () => {
    expect(() => resolveTiming("at", "2026-03-07T09:59:59Z", "UTC", NOW)).toThrow(/in the past/);
    expect(() => resolveTiming("at", "2026-03-07T10:00:00Z", "UTC", NOW)).toThrow(/in the past/);
    expect(parseRfc3339("2026-02-30T00:00:00Z")).toBeNull();
    expect(() => resolveTiming("at", "yesterday", "UTC", NOW)).toThrow(/in the past/);
    expect(() => resolveTiming("at", "not a date at all", "UTC", NOW)).toThrow(/neither an RFC 3339/);
  });

  it("parses natural language forward in the schedule's time zone", () => {
    expect(resolveTiming("at", "in 2 hours", "Europe/Paris", NOW).value).toBe("2026-03-07T12:00:00.000Z");
    // 9am Paris (UTC+1 in March) tomorrow
    expect(resolveTiming("at", "tomorrow at 9am", "Europe/Paris", NOW).value).toBe("2026-03-08T08:00:00.000Z");
    expect(resolveTiming("at", "tomorrow at 9am", "UTC", NOW).value).toBe("2026-03-08T09:00:00.000Z");
    // the coming Friday, 17:00 New York (EST until 03-08, EDT on 03-13)
    expect(resolveTiming("at", "next friday 17:00", "America/New_York", NOW).value).toBe("2026-03-13T21:00:00.000Z");
  });

  it("refuses text chrono only partly understands (a recurrence would be silently dropped)", () => {
    expect(() => resolveTiming("at", "every day at 9am", "UTC", NOW)).toThrow(/neither an RFC 3339/);
  });

  it("resolves `sleep` to an `at` now + duration, strictly", () => {
    expect(resolveTiming("sleep", "30s", "UTC", NOW)).toEqual({ type: "at", value: "2026-03-07T10:00:30.000Z" });
    expect(resolveTiming("sleep", "1h30m", "UTC", NOW).value).toBe("2026-03-07T11:30:00.000Z");
    expect(resolveTiming("sleep", "7d", "UTC", NOW).value).toBe("2026-03-14T10:00:00.000Z");
    for (const bad of ["-5m", "10", "0m", "5ms", "2 hours", "1m1h"]) expect(() => resolveTiming("sleep", bad, "UTC", NOW), bad).toThrow(/invalid duration/);
  });
});
