import { describe, expect, it } from "vitest";
import { parseRange } from "../../../sandbox-agent/filesystem/download.js";

describe("parseRange (RFC 9110 §14, a 1000-byte file)", () => {
  it.each([
    [undefined, "all"],
    ["bytes=0-99", { start: 0, end: 99 }],
    ["bytes=500-", { start: 500, end: 999 }],
    ["bytes=999-", { start: 999, end: 999 }],
    ["bytes=900-5000", { start: 900, end: 999 }],
    ["bytes=-100", { start: 900, end: 999 }],
    ["bytes=-5000", { start: 0, end: 999 }],
    // Past the end: no byte overlaps, 416 (Go's http.ServeContent, which the reference serves downloads with).
    ["bytes=1000-", "unsatisfiable"],
    ["bytes=5000-", "unsatisfiable"],
    ["bytes=5000-6000", "unsatisfiable"],
    ["bytes=-0", "unsatisfiable"],
    // Not one valid range: ignored, the whole file (RFC 9110 lets a server ignore an invalid Range).
    ["bytes=900-100", "all"],
    ["bytes=0-1,5-6", "all"],
    ["items=0-1", "all"],
    ["bytes=-", "all"],
  ])("%s → %j", (header, expected) => {
    expect(parseRange(header, 1000)).toEqual(expected);
  });
  it("any range of an empty file is unsatisfiable", () => {
    expect(parseRange("bytes=0-", 0)).toBe("unsatisfiable");
    expect(parseRange("bytes=-1", 0)).toBe("unsatisfiable");
  });
});
