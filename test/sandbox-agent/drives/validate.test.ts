import { describe, expect, it } from "vitest";
import { ApiError } from "../../../src/errors.js";
import {
  checkMountTarget,
  isSameOrInside,
  normalizeDrivePath,
  normalizeMountPath,
  overlaps,
  validateDriveName,
} from "../../../sandbox-agent/drives/validate.js";

function badRequest(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return (e as ApiError).message;
  }
  throw new Error("expected a 400");
}

describe("driveName", () => {
  it.each(["a", "A9", "my-drive", "my_drive", "0", "x".repeat(128)])("accepts %s", (name) => {
    expect(validateDriveName(name)).toBe(name);
  });
  it.each(["", "-a", "_a", "a b", "a/b", "..", "a.b", "a@b", "é", "x".repeat(129)])("refuses %j naming the field", (name) => {
    expect(badRequest(() => validateDriveName(name))).toMatch(/^driveName: /);
  });
});

describe("drivePath", () => {
  it.each([
    [undefined, "/"],
    ["", "/"],
    ["/", "/"],
    ["sub", "/sub"],
    ["/a/b/", "/a/b"],
    ["//a//b", "/a/b"],
  ])("%j → %j", (raw, expected) => {
    expect(normalizeDrivePath(raw)).toBe(expected);
  });
  it.each(["..", "/a/../b", "/a/..", "./a", "/a/./b", "a\0b"])("refuses %j naming the field", (raw) => {
    expect(badRequest(() => normalizeDrivePath(raw))).toMatch(/^drivePath: /);
  });
});

describe("mountPath", () => {
  it.each([
    ["/mnt/data", "/mnt/data"],
    ["/mnt/data/", "/mnt/data"],
    ["//mnt//data", "/mnt/data"],
    ["/home/user/lib", "/home/user/lib"],
    ["/usrx", "/usrx"],
  ])("%j → %j", (raw, expected) => {
    expect(normalizeMountPath(raw)).toBe(expected);
  });
  it.each([
    ["", /is required/],
    ["mnt/data", /absolute/],
    ["/mnt/../data", /normalized/],
    ["/mnt/./data", /normalized/],
    ["/", /sandbox root/],
    ["//", /sandbox root/],
    ["/proc", /system path/],
    ["/proc/1", /system path/],
    ["/sys/fs", /system path/],
    ["/dev", /system path/],
    ["/etc/x", /system path/],
    ["/bin", /system path/],
    ["/sbin", /system path/],
    ["/usr/local/bin", /system path/],
    ["/lib", /system path/],
    ["/boot", /system path/],
    ["/run/x", /system path/],
    [`/${"a".repeat(600)}`, /too long/],
  ])("refuses %j naming the field", (raw, reason) => {
    const message = badRequest(() => normalizeMountPath(raw));
    expect(message).toMatch(/^mountPath: /);
    expect(message).toMatch(reason);
  });
  it("says which path a symlinked mount path resolved to", () => {
    expect(badRequest(() => checkMountTarget("/etc/x", "/data/x"))).toContain("/data/x resolves to /etc/x");
  });
});

describe("path relations", () => {
  it("inside and overlap are by whole components", () => {
    expect(isSameOrInside("/mnt/a/b", "/mnt/a")).toBe(true);
    expect(isSameOrInside("/mnt/ab", "/mnt/a")).toBe(false);
    expect(overlaps("/mnt", "/mnt/a")).toBe(true);
    expect(overlaps("/mnt/a", "/mnt/a")).toBe(true);
    expect(overlaps("/mnt/a", "/mnt/b")).toBe(false);
  });
});
