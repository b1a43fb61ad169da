import { describe, expect, it } from "vitest";
import { MAX_BATCH_EVENTS, parseUsageEvents } from "../../../simulator/metrics/ingest.js";
import { parseGroupBy, parseRfc3339 } from "../../../simulator/metrics/params.js";

describe("parseRfc3339", () => {
  it("accepts RFC 3339 date-times with Z or a numeric offset, and fractions to the nanosecond", () => {
    const cases: Array<[string, string]> = [
      ["2026-05-01T00:00:00Z", "2026-05-01T00:00:00.000Z"],
      ["2026-05-01t10:20:30z", "2026-05-01T10:20:30.000Z"],
      ["2026-05-01T10:20:30.5Z", "2026-05-01T10:20:30.500Z"],
      ["2026-05-01T10:20:30.123456789Z", "2026-05-01T10:20:30.123Z"],
      ["2026-05-01T02:00:00+02:00", "2026-05-01T00:00:00.000Z"],
      ["2026-04-30T23:30:00-00:30", "2026-05-01T00:00:00.000Z"],
      ["2024-02-29T23:59:59.999Z", "2024-02-29T23:59:59.999Z"],
      ["2000-02-29T00:00:00Z", "2000-02-29T00:00:00.000Z"],
      ["1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"],
    ];
    for (const [input, iso] of cases) expect([input, new Date(parseRfc3339(input)!).toISOString()]).toEqual([input, iso]);
  });

  it("refuses anything else", () => {
    for (const bad of [
      "",
      "2026-05-01",
      "2026-05-01T00:00:00",
      "2026-05-01 00:00:00Z",
      "2026-05-01T00:00Z",
      "2026-5-01T00:00:00Z",
      "2026-02-29T00:00:00Z",
      "1900-02-29T00:00:00Z",
      "2026-04-31T00:00:00Z",
      "2026-00-10T00:00:00Z",
      "2026-05-01T24:00:00Z",
      "2026-05-01T23:60:00Z",
      "2026-05-01T23:59:60Z",
      "2026-05-01T00:00:00.Z",
      "2026-05-01T00:00:00.1234567890Z",
      "2026-05-01T00:00:00+0200",
      "2026-05-01T00:00:00+24:00",
      "2026-05-01T00:00:00Zjunk",
      "1969-12-31T23:59:59Z",
      "0050-01-01T00:00:00Z",
      "1970-01-01T00:00:00+01:00",
      "２026-05-01T00:00:00Z",
    ]) {
      expect([bad, parseRfc3339(bad)]).toEqual([bad, undefined]);
    }
  });
});

describe("parseGroupBy", () => {
  it("returns the dimensions in canonical order, whatever the order given", () => {
    expect(parseGroupBy("billing_dimension,workspace")).toEqual(["workspace", "billing_dimension"]);
    expect(parseGroupBy(" resource_uuid , resource_type ")).toEqual(["resource_type", "resource_uuid"]);
    expect(parseGroupBy(undefined)).toEqual([]);
    expect(parseGroupBy("")).toEqual([]);
  });
});

describe("parseUsageEvents", () => {
  it("caps a batch at 200,000 events before looking at any of them", () => {
    expect(() => parseUsageEvents(new Array(MAX_BATCH_EVENTS + 1).fill(null))).toThrow(
      `body: at most ${MAX_BATCH_EVENTS} events per request, got ${MAX_BATCH_EVENTS + 1}`,
    );
    expect(() => parseUsageEvents({ events: new Array(MAX_BATCH_EVENTS + 1).fill(null) })).toThrow("body.events: at most");
  });
});
