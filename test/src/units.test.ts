import { describe, expect, it } from "vitest";
import { parseDuration, parseSize } from "../../src/units.js";

describe("parseDuration", () => {
  it.each([
    ["30s", 30_000],
    ["15m", 900_000],
    ["2h", 7_200_000],
    ["7d", 604_800_000],
    ["1h30m", 5_400_000],
    ["1d2h3m4s", 93_784_000],
    ["500ms", 500],
  ])("%s = %d ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["10", "-5m", "0m", "", "5 m", "1.5h", "30m1h", "1h1h", "2w", "h"])("rejects %j", (text) => {
    expect(() => parseDuration(text)).toThrow(/invalid duration/);
  });

  it("restricts units when asked", () => {
    expect(() => parseDuration("500ms", ["s", "m", "h", "d"])).toThrow(/not allowed/);
  });
});

describe("parseSize", () => {
  it.each([
    ["5GiB", 5 * 2 ** 30],
    ["100MiB", 100 * 2 ** 20],
    ["512k", 512_000],
    ["1048576", 1_048_576],
    ["1.5KiB", 1536],
  ])("%s = %d bytes", (text, bytes) => expect(parseSize(text)).toBe(bytes));

  it.each(["", "abc", "5XB", "0", "-1MiB"])("rejects %j", (text) => expect(() => parseSize(text)).toThrow(/invalid size/));
});
