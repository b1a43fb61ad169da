import { describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/sqlite.js";
import { autoResolution, bucketSql, bucketStart, bucketStarts, DAY_MS, RESOLUTIONS } from "../../../simulator/metrics/buckets.js";
import { rng } from "./harness.js";

const iso = (ms: number) => new Date(ms).toISOString();
const t = (s: string) => Date.parse(s);

describe("bucket alignment", () => {
  it("aligns to the hour, 00:00 UTC, Monday 00:00 UTC and the first of the month", () => {
    const ts = t("2026-03-05T17:42:13.500Z"); // a Thursday
    expect(iso(bucketStart(ts, "hourly"))).toBe("2026-03-05T17:00:00.000Z");
    expect(iso(bucketStart(ts, "daily"))).toBe("2026-03-05T00:00:00.000Z");
    expect(iso(bucketStart(ts, "weekly"))).toBe("2026-03-02T00:00:00.000Z");
    expect(new Date(bucketStart(ts, "weekly")).getUTCDay()).toBe(1);
    expect(iso(bucketStart(ts, "monthly"))).toBe("2026-03-01T00:00:00.000Z");
    // A Monday is its own week start; a Sunday belongs to the week before.
    expect(iso(bucketStart(t("2026-03-09T00:00:00Z"), "weekly"))).toBe("2026-03-09T00:00:00.000Z");
    expect(iso(bucketStart(t("2026-03-08T23:59:59Z"), "weekly"))).toBe("2026-03-02T00:00:00.000Z");
  });

  it("lists every bucket intersecting the window, the first one starting before a mid-bucket start", () => {
    expect(bucketStarts(t("2026-01-28T12:00:00Z"), t("2026-04-02T00:00:00Z"), "monthly").map(iso)).toEqual([
      "2026-01-01T00:00:00.000Z",
      "2026-02-01T00:00:00.000Z",
      "2026-03-01T00:00:00.000Z",
      "2026-04-01T00:00:00.000Z",
    ]);
    expect(bucketStarts(t("2026-03-04T00:00:00Z"), t("2026-03-16T00:00:00Z"), "weekly").map(iso)).toEqual([
      "2026-03-02T00:00:00.000Z",
      "2026-03-09T00:00:00.000Z",
    ]);
    expect(bucketStarts(t("2026-03-01T10:30:00Z"), t("2026-03-01T13:00:00Z"), "hourly")).toHaveLength(3);
    expect(bucketStarts(t("2026-03-01T00:00:00Z"), t("2026-03-31T00:00:00Z"), "daily")).toHaveLength(30);
  });

  it("computes the same bucket in SQL as in JS, for every resolution", () => {
    const db = openDatabase(":memory:");
    const r = rng(7);
    const samples = [
      0,
      t("2024-02-29T23:59:59.999Z"),
      t("2026-12-31T23:00:00Z"),
      ...Array.from({ length: 300 }, () => Math.floor(r() * t("2040-01-01T00:00:00Z"))),
    ];
    for (const res of RESOLUTIONS) {
      const stmt = db.prepare(`SELECT ${bucketSql("CAST(@ts AS INTEGER)", res)} AS b`).pluck();
      for (const ts of samples) expect([res, iso(stmt.get({ ts }) as number)]).toEqual([res, iso(bucketStart(ts, res))]);
    }
  });

  it("picks the resolution from the window length: < 7 d hourly, < 90 d daily, < 1 y weekly, else monthly", () => {
    expect(autoResolution(7 * DAY_MS - 1)).toBe("hourly");
    expect(autoResolution(7 * DAY_MS)).toBe("daily");
    expect(autoResolution(90 * DAY_MS - 1)).toBe("daily");
    expect(autoResolution(90 * DAY_MS)).toBe("weekly");
    expect(autoResolution(365 * DAY_MS - 1)).toBe("weekly");
    expect(autoResolution(365 * DAY_MS)).toBe("monthly");
  });
});
