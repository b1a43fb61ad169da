import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../../src/errors.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { openat2Support } from "../../../sandbox-agent/paths/openat2.js";
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

const MODES = ["path-checks", ...(openat2Support().available ? (["openat2"] as const) : [])] as const;

describe.each(MODES)("SandboxPaths.resolve (%s)", (mode) => {
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
    symlinkSync("/inside/file", join(root, "sandbox-abs-link")); // absolute, as a process inside the sandbox makes it
    paths = new SandboxPaths(root, { confinement: mode });
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
  /**
   * path-checks reads an absolute link target as a host path and refuses one outside the root (403);
   * openat2 reads it as the sandbox would (a path under the root, chroot-like): it never leaves.
   */
  const expectConfined = async (p: string, inRoot: string) => {
    if (mode === "path-checks") return expect403(p);
    expect(await paths.resolve(p)).toBe(join(paths.hostRoot, inRoot));
  };

  it("says which mechanism confines", () => {
    expect(paths.confinement.mode).toBe(mode);
  });
  it("maps a plain path under the root", async () => {
    expect(await paths.resolve("/inside/file")).toBe(join(paths.hostRoot, "inside/file"));
  });
  it("keeps missing components", async () => {
    expect(await paths.resolve("/inside/new/deeper.txt")).toBe(join(paths.hostRoot, "inside/new/deeper.txt"));
  });
  it("follows a symlink that stays inside", async () => {
    expect(await paths.resolve("/ok-link")).toBe(join(paths.hostRoot, "inside/file"));
  });
  it("an absolute symlink leading outside stays confined", () => expectConfined("/abs-out/secret", join(outside, "secret")));
  it("a relative symlink leading outside stays confined", () => expectConfined("/rel-out/secret", "outside/secret"));
  it("a symlink chain leading outside stays confined", () => expectConfined("/hop1", join(outside, "secret")));
  it("a dangling symlink whose target is outside stays confined (a write would create it)", () => expectConfined("/dangling-out", join(outside, "new-file")));
  it("a symlink to a system directory stays confined", () => expectConfined("/etc-link/passwd", "etc/passwd"));
  it("resolveParent keeps the final symlink itself (delete removes the link)", async () => {
    expect(await paths.resolveParent("/abs-out")).toBe(join(paths.hostRoot, "abs-out"));
  });
  it("resolveParent still confines a parent outside", () => {
    if (mode === "path-checks") return expect(paths.resolveParent("/abs-out/secret")).rejects.toMatchObject({ status: 403 });
    return expect(paths.resolveParent("/abs-out/secret")).resolves.toBe(join(paths.hostRoot, outside, "secret"));
  });
  it.runIf(mode === "openat2")("an absolute link made inside the sandbox resolves under the root", async () => {
    expect(await paths.resolve("/sandbox-abs-link")).toBe(join(paths.hostRoot, "inside/file"));
  });
  it("echoes sandbox paths for host paths", () => {
    expect(paths.toSandboxPath(join(paths.hostRoot, "a/b"))).toBe("/a/b");
    expect(paths.toSandboxPath(paths.hostRoot)).toBe("/");
  });
});
