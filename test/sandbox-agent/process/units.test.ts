import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { decodeAddress, isRoutable } from "../../../sandbox-agent/network/sockets.js";
import { timeoutsOf } from "../../../sandbox-agent/process/execute.js";
import { shellFor } from "../../../sandbox-agent/process/spawn.js";
import { globMatcher, isSubsequence } from "../../../sandbox-agent/mcp/search.js";

describe("kernel socket addresses", () => {
  it.each([
    ["0100007F:1F90", "127.0.0.1", 8080],
    ["00000000:0050", "0.0.0.0", 80],
    ["00000000000000000000000000000000:0016", "::", 22],
    ["00000000000000000000000001000000:0BB8", "::1", 3000],
    ["0000000000000000FFFF00000100007F:0035", "::ffff:127.0.0.1", 53],
    ["B80D0120000000000000000001000000:01BB", "2001:db8::1", 443],
  ])("%s → %s:%d", (hex, addr, port) => {
    expect(decodeAddress(hex)).toEqual({ addr, port });
  });

  it("loopback is not routable", () => {
    expect(["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"].map(isRoutable)).toEqual([false, false, false, false]);
    expect(["0.0.0.0", "::", "10.0.0.5", "::ffff:10.0.0.5"].map(isRoutable)).toEqual([true, true, true, true]);
  });
});

describe("timeouts (reference §4.2)", () => {
  it.each([
    [undefined, false, 0, 0],
    [null, false, 0, 0],
    [30, false, 30, 0],
    [-1, false, 0, 0],
    [undefined, true, 600, 600],
    [-1, true, 600, 600],
    [0, true, 0, 0],
    [5, true, 5, 5],
  ] as const)("timeout %s keepAlive %s → wait %d, kill after %d", (timeout, keepAlive, wait, killAfter) => {
    expect(timeoutsOf(timeout, keepAlive)).toEqual({ timeout: wait, killAfter });
  });
});

describe("the shell", () => {
  // A PATH of this test's own: a directory holding executable sh and bash.
  const bin = mkdtempSync(join(tmpdir(), "shell-path-"));
  for (const name of ["sh", "bash"]) writeFileSync(join(bin, name), "#!/bin/true\n", { mode: 0o755 });
  mkdirSync(join(bin, "dir-not-a-shell"));
  const PATH = `/nonexistent-dir:${bin}`;
  afterAll(() => rmSync(bin, { recursive: true, force: true }));

  it("is the agent's $SHELL with $SHELL_ARGS split on whitespace, else sh on the agent's PATH with -c (the reference's rule)", () => {
    expect(shellFor({ PATH })).toEqual({ file: join(bin, "sh"), args: ["-c"] });
    expect(shellFor({ PATH, SHELL: "", SHELL_ARGS: "" })).toEqual({ file: join(bin, "sh"), args: ["-c"] });
    expect(shellFor({ SHELL: "/bin/bash" })).toEqual({ file: "/bin/bash", args: ["-c"] });
    expect(shellFor({ SHELL: "/bin/zsh", SHELL_ARGS: " -l \t -c " })).toEqual({ file: "/bin/zsh", args: ["-l", "-c"] });
    // strings.Fields of blanks is no argument at all: the command becomes the shell's script operand.
    expect(shellFor({ SHELL: "/bin/bash", SHELL_ARGS: "   " })).toEqual({ file: "/bin/bash", args: [] });
  });

  it("looks a name without a slash up on PATH, as Go's exec.Command does; one found nowhere stays as given", () => {
    expect(shellFor({ PATH, SHELL: "bash" })).toEqual({ file: join(bin, "bash"), args: ["-c"] });
    expect(shellFor({ PATH, SHELL: "dir-not-a-shell" })).toEqual({ file: "dir-not-a-shell", args: ["-c"] });
    expect(shellFor({ PATH, SHELL: "no-such-shell" })).toEqual({ file: "no-such-shell", args: ["-c"] });
    expect(shellFor({ PATH: "", SHELL: "" })).toEqual({ file: "sh", args: ["-c"] });
  });
});

describe("search helpers", () => {
  it("globs as ripgrep's -g", () => {
    expect(globMatcher("*.ts")("src/a/b.ts")).toBe(true);
    expect(globMatcher("*.ts")("src/a/b.tsx")).toBe(false);
    expect(globMatcher("src/**/*.ts")("src/a/b/c.ts")).toBe(true);
    expect(globMatcher("src/**/*.ts")("src/c.ts")).toBe(true);
    expect(globMatcher("**/lib/**")("app/lib/x.ts")).toBe(true);
    expect(globMatcher("*.{js,ts}")("x.js")).toBe(true);
    expect(globMatcher("a,b.txt")("a,b.txt")).toBe(true);
    expect(globMatcher("file?.[ch]")("file1.c")).toBe(true);
  });

  it("subsequence match, case-insensitive", () => {
    expect(isSubsequence("PrcMgr", "process-manager.ts")).toBe(true);
    expect(isSubsequence("mgrp", "process-manager.ts")).toBe(false);
  });
});
