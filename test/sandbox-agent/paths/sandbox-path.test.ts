import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../../src/errors.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { tempDir } from "../../helpers/agent.js";

describe("SandboxPaths.normalize", () => {
  const paths = new SandboxPaths(tempDir());
  it.each([
    ["/tmp/x", "/tmp/x"],
    ["tmp/x", "/tmp/x"],
    ["//tmp//x/", "/tmp/x"],
    ["/a/./b/../c", "/a/c"],
    ["/", "/"],
    ["", "/"],
  ])("%s → %s", (raw, expected) => {
    expect(paths.normalize(raw)).toBe(expected);
  });

  it.each(["/..", "/../etc/passwd", "/a/../../b", "../x"])("refuses %s with 403", (raw) => {
    expect(() => paths.normalize(raw)).toThrowError(expect.objectContaining({ status: 403 }));
  });

  it("refuses NUL bytes with 400", () => {
    expect(() => paths.normalize("/a\0b")).toThrowError(expect.objectContaining({ status: 400 }));
  });
});

describe("SandboxPaths.resolve", () => {
  let base: string;
  let root: string;
  let outside: string;
  let paths: SandboxPaths;

  beforeAll(() => {
    base = tempDir();
    root = join(base, "root");
    outside = join(base, "outside");
    mkdirSync(join(root, "inside"), { recursive: true });
    mkdirSync(outside, { recursive: true });
    writeFileSync(join(outside, "secret"), "s");
    writeFileSync(join(root, "inside", "file"), "f");
    symlinkSync(outside, join(root, "abs-out")); // absolute symlink leaving the root
    symlinkSync("../outside", join(root, "rel-out")); // relative symlink leaving the root
    symlinkSync("hop2", join(root, "hop1")); // a chain ending outside
    symlinkSync(join(outside, "secret"), join(root, "hop2"));
    symlinkSync("inside/file", join(root, "ok-link")); // stays inside
    symlinkSync(join(outside, "new-file"), join(root, "dangling-out")); // dangling, target outside
    symlinkSync("/etc", join(root, "etc-link"));
    paths = new SandboxPaths(root);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const expect403 = async (p: string) => {
    const err = await paths.resolve(p).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(403);
  };

  it("maps a plain path under the root", async () => {
    expect(await paths.resolve("/inside/file")).toBe(join(paths.hostRoot, "inside/file"));
  });
  it("keeps missing components", async () => {
    expect(await paths.resolve("/inside/new/deeper.txt")).toBe(join(paths.hostRoot, "inside/new/deeper.txt"));
  });
  it("follows a symlink that stays inside", async () => {
    expect(await paths.resolve("/ok-link")).toBe(join(paths.hostRoot, "inside/file"));
  });
  it("refuses an absolute symlink leading outside", () => expect403("/abs-out/secret"));
  it("refuses a relative symlink leading outside", () => expect403("/rel-out/secret"));
  it("refuses a symlink chain leading outside", () => expect403("/hop1"));
  it("refuses a dangling symlink whose target is outside (a write would create it)", () => expect403("/dangling-out"));
  it("refuses a symlink to a system directory", () => expect403("/etc-link/passwd"));
  it("resolveParent keeps the final symlink itself (delete removes the link)", async () => {
    expect(await paths.resolveParent("/abs-out")).toBe(join(paths.hostRoot, "abs-out"));
  });
  it("resolveParent still refuses a parent outside", async () => {
    await expect(paths.resolveParent("/abs-out/secret")).rejects.toMatchObject({ status: 403 });
  });
  it("echoes sandbox paths for host paths", () => {
    expect(paths.toSandboxPath(join(paths.hostRoot, "a/b"))).toBe("/a/b");
    expect(paths.toSandboxPath(paths.hostRoot)).toBe("/");
  });
});
