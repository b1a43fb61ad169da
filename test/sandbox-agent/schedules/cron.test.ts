import { describe, expect, it } from "vitest";
import { nextCronFire, parseCron } from "../../../sandbox-agent/schedules/cron.js";

const next = (expr: string, after: string, tz = "UTC") => {
  const ms = nextCronFire(parseCron(expr), tz, Date.parse(after));
  return ms === null ? null : new Date(ms).toISOString();
};

/** The next `n` fire times after `after`. */
const series = (expr: string, after: string, n: number, tz = "UTC") => {
  const spec = parseCron(expr);
  const out: string[] = [];
  let t = Date.parse(after);
  for (let i = 0; i < n; i++) {
    t = nextCronFire(spec, tz, t)!;
    out.push(new Date(t).toISOString());
  }
  return out;
};

describe("parseCron", () => {
  it("accepts 5 fields with names, ranges, steps and lists", () => {
    expect(parseCron("0 8 * * mon-fri").hours).toEqual([8]);
    expect(parseCron("*/15 * * * *").minutes).toEqual([0, 15, 30, 45]);
    expect(parseCron("  0   0 1,15 JAN *  ").expression).toBe("0 0 1,15 JAN *");
  });

  it.each([
    ["* * * * * *", /exactly 5 fields.*got 6.*seconds/],
    ["* * * *", /exactly 5 fields.*got 4/],
    ["@daily", /nicknames/],
    ["61 * * * *", /invalid minute field "61"/],
    ["* 24 * * *", /invalid hour field "24"/],
    ["foo bar baz qux quux", /invalid minute field "foo"/],
    ["*/0 * * * *", /invalid minute/],
    ["0 0 31 2 *", /day-of-month/],
  ])("rejects %s", (expr, message) => {
    expect(() => parseCron(expr)).toThrow(message);
  });
});

describe("nextCronFire in UTC", () => {
  it("is strictly after the given instant", () => {
    expect(next("*/5 * * * *", "2026-01-01T00:00:00Z")).toBe("2026-01-01T00:05:00.000Z");
    expect(next("*/5 * * * *", "2026-01-01T00:04:59.999Z")).toBe("2026-01-01T00:05:00.000Z");
    expect(next("0 8 * * 1-5", "2026-01-02T08:00:00Z")).toBe("2026-01-05T08:00:00.000Z"); // Fri → Mon
  });

  it("crosses months and years, and finds Feb 29", () => {
    expect(next("0 0 1 * *", "2026-12-15T00:00:00Z")).toBe("2027-01-01T00:00:00.000Z");
    expect(next("0 12 29 2 *", "2026-03-01T00:00:00Z")).toBe("2028-02-29T12:00:00.000Z");
  });

  it("fires on a day matching EITHER restricted day-of-month or day-of-week (POSIX rule)", () => {
    // 2026-01-01 is a Thursday; the 13th is a Tuesday; Fridays are 2, 9, 16...
    expect(series("0 0 13 * 5", "2026-01-01T00:00:00Z", 4)).toEqual([
      "2026-01-02T00:00:00.000Z",
      "2026-01-09T00:00:00.000Z",
      "2026-01-13T00:00:00.000Z",
      "2026-01-16T00:00:00.000Z",
    ]);
    // with one of them `*`, the other alone decides
    expect(series("0 0 * * 5", "2026-01-01T00:00:00Z", 2)).toEqual(["2026-01-02T00:00:00.000Z", "2026-01-09T00:00:00.000Z"]);
  });

  it("understands L and # modifiers", () => {
    expect(next("0 0 L * *", "2026-02-01T00:00:00Z")).toBe("2026-02-28T00:00:00.000Z");
    expect(next("0 0 * * 5#2", "2026-01-01T00:00:00Z")).toBe("2026-01-09T00:00:00.000Z");
  });
});

describe("nextCronFire across DST (America/New_York: 2026-03-08 02:00 → 03:00, 2026-11-01 02:00 → 01:00)", () => {
  const ny = "America/New_York";

  it("uses the zone's wall clock", () => {
    expect(next("0 9 * * *", "2026-01-10T00:00:00Z", ny)).toBe("2026-01-10T14:00:00.000Z"); // EST
    expect(next("0 9 * * *", "2026-07-10T00:00:00Z", ny)).toBe("2026-07-10T13:00:00.000Z"); // EDT
  });

  it("fires a fixed-time job in the spring-forward gap once, at the end of the gap", () => {
    expect(series("30 2 * * *", "2026-03-07T12:00:00Z", 3, ny)).toEqual([
      "2026-03-08T07:00:00.000Z", // 03:00 EDT: 02:30 does not exist
      "2026-03-09T06:30:00.000Z", // 02:30 EDT
      "2026-03-10T06:30:00.000Z",
    ]);
  });

  it("runs a wildcard job on the new clock through the gap (no run in the missing hour)", () => {
    expect(series("30 * * * *", "2026-03-08T05:00:00Z", 3, ny)).toEqual([
      "2026-03-08T05:30:00.000Z", // 00:30 EST
      "2026-03-08T06:30:00.000Z", // 01:30 EST
      "2026-03-08T07:30:00.000Z", // 03:30 EDT: 02:30 does not exist
    ]);
  });

  it("fires a fixed-time job in the fall-back overlap only on the first occurrence", () => {
    expect(series("30 1 * * *", "2026-10-31T12:00:00Z", 2, ny)).toEqual([
      "2026-11-01T05:30:00.000Z", // 01:30 EDT, not 01:30 EST (06:30Z)
      "2026-11-02T06:30:00.000Z",
    ]);
  });

  it("runs a wildcard job in both occurrences of the repeated hour", () => {
    expect(series("30 * * * *", "2026-11-01T04:00:00Z", 3, ny)).toEqual([
      "2026-11-01T04:30:00.000Z", // 00:30 EDT
      "2026-11-01T05:30:00.000Z", // 01:30 EDT
      "2026-11-01T06:30:00.000Z", // 01:30 EST
    ]);
  });

  it("handles a zone with a half-hour DST shift (Australia/Lord_Howe)", () => {
    // 2026-10-04 02:00 → 02:30 local (+10:30 → +11): 02:15 fires at 02:30 (+11), the next day at 02:15 (+11)
    expect(series("15 2 * * *", "2026-10-03T12:00:00Z", 2, "Australia/Lord_Howe")).toEqual(["2026-10-03T15:30:00.000Z", "2026-10-04T15:15:00.000Z"]);
  });
});
