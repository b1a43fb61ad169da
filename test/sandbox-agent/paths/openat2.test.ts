import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openat2, openat2Support, openat2Sync, resolveFlags } from "../../../sandbox-agent/paths/openat2.js";
import { SandboxPaths } from "../../../sandbox-agent/paths/sandbox-path.js";
import { parseAgentConfig } from "../../../sandbox-agent/config.js";
import { startTestAgent, tempDir } from "../../helpers/agent.js";

const support = openat2Support();

describe.skipIf(!support.available)("the openat2 addon", () => {
  let root: string;
  let rootFd: number;
  let outside: string;
  const F = support.available ? resolveFlags() : ({} as ReturnType<typeof resolveFlags>);
  const IN_ROOT = () => F.IN_ROOT | F.NO_MAGICLINKS;
  const where = (fd: number) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } finally {
      closeSync(fd);
    }
  };

  beforeAll(() => {
    root = tempDir();
    outside = tempDir("sandbox-kit-outside-");
    writeFileSync(join(outside, "secret"), "OUTSIDE");
    mkdirSync(join(root, "dir"));
    writeFileSync(join(root, "dir", "file"), "inside");
    symlinkSync("/", join(root, "to-slash"));
    symlinkSync(outside, join(root, "to-outside"));
    symlinkSync("../../../../../../..", join(root, "dir", "up"));
    symlinkSync("/proc/self/root", join(root, "to-proc"));
    rootFd = openSync(root, F.O_PATH | constants.O_DIRECTORY);
  });
  afterAll(() => closeSync(rootFd));

  it("opens below the root, synchronously and on the thread pool", async () => {
    expect(where(openat2Sync(rootFd, "dir/file", constants.O_RDONLY, IN_ROOT()))).toBe(join(root, "dir", "file"));
    expect(where(await openat2(rootFd, "/dir/file", constants.O_RDONLY, IN_ROOT()))).toBe(join(root, "dir", "file"));
  });
  it("keeps `..`, absolute links and links of `..` inside the root (RESOLVE_IN_ROOT)", async () => {
    expect(where(await openat2(rootFd, "/../../..", F.O_PATH, IN_ROOT()))).toBe(root);
    expect(where(await openat2(rootFd, "to-slash", F.O_PATH, IN_ROOT()))).toBe(root);
    expect(where(await openat2(rootFd, "dir/up/dir/file", F.O_PATH, IN_ROOT()))).toBe(join(root, "dir", "file"));
    await expect(openat2(rootFd, "to-outside/secret", constants.O_RDONLY, IN_ROOT())).rejects.toMatchObject({ code: "ENOENT" });
  });
  it("refuses magic links (RESOLVE_NO_MAGICLINKS) with ELOOP", async () => {
    const slash = openSync("/", F.O_PATH | constants.O_DIRECTORY);
    try {
      await expect(openat2(slash, "/proc/self/root/etc", F.O_PATH, IN_ROOT())).rejects.toMatchObject({ code: "ELOOP", syscall: "openat2" });
    } finally {
      closeSync(slash);
    }
  });
  it("throws errno-coded errors like Node's fs (code, negative errno, syscall, path)", async () => {
    expect(() => openat2Sync(rootFd, "nope", constants.O_RDONLY, IN_ROOT())).toThrowError(
      expect.objectContaining({ code: "ENOENT", errno: -2, syscall: "openat2", path: "nope", message: expect.stringMatching(/^ENOENT/) }),
    );
    await expect(openat2(rootFd, "dir/file/x", constants.O_RDONLY, IN_ROOT())).rejects.toMatchObject({ code: "ENOTDIR" });
    await expect(openat2(rootFd, "dir", constants.O_WRONLY, IN_ROOT())).rejects.toMatchObject({ code: "EISDIR" });
  });
  it("refuses bad arguments (an embedded NUL would shorten the path) with a TypeError", () => {
    expect(() => openat2Sync(rootFd, "dir\0/../to-outside", constants.O_RDONLY, IN_ROOT())).toThrowError(TypeError);
  });
  it("opens with close-on-exec", () => {
    const fd = openat2Sync(rootFd, "dir/file", constants.O_RDONLY, IN_ROOT());
    try {
      const flags = /flags:\s+([0-7]+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))![1]!;
      expect(parseInt(flags, 8) & 0o2000000).not.toBe(0); // O_CLOEXEC
      expect(fstatSync(fd).isFile()).toBe(true);
    } finally {
      closeSync(fd);
    }
  });
  it("SandboxPaths over a root descriptor (as an agent host passes /proc/<pid>/root): confined, and the descriptor stays the caller's", async () => {
    const fd = openSync(root, F.O_PATH | constants.O_DIRECTORY);
    const paths = new SandboxPaths({ fd, label: `/proc/self/fd/${fd}` });
    expect(paths.confinement).toEqual({ mode: "openat2" });
    expect(paths.hostRoot).toBe(`/proc/self/fd/${fd}`);
    const read = (p: string) => paths.use(p, { follow: true }, async (pinned) => (pinned.pinned ? readFileSync(pinned.pinned, "utf8") : undefined));
    expect(await read("/to-slash/dir/file")).toBe("inside");
    expect(await read("/to-outside/secret")).toBeUndefined();
    expect(await read("/to-proc/etc/passwd")).toBeUndefined(); // `/proc/self/root` under this root: nothing there
    await paths.close();
    expect(fstatSync(fd).isDirectory()).toBe(true);
    closeSync(fd);
  });
});

describe("confinement choice", () => {
  it("says why openat2 is not used where it cannot be", () => {
    if (support.available) expect(support).toEqual({ available: true });
    else expect(support.reason).toMatch(/openat2/);
  });
  it.runIf(support.available)("a link into the root by host path (symlink drives) makes auto fall back, and a demanded openat2 refuse", () => {
    const auto = new SandboxPaths(tempDir());
    expect(auto.confinement.mode).toBe("openat2");
    auto.requireHostLinks("drives linked by host path");
    expect(auto.confinement).toEqual({ mode: "path-checks", reason: "drives linked by host path" });
    const forced = new SandboxPaths(tempDir(), { confinement: "openat2" });
    expect(() => forced.requireHostLinks("drives linked by host path")).toThrow(/--confinement openat2: drives linked by host path/);
  });
  it("forced path-checks says so", () => {
    expect(new SandboxPaths(tempDir(), { confinement: "path-checks" }).confinement).toEqual({
      mode: "path-checks",
      reason: expect.stringMatching(/forced/),
    });
  });
  it("/health says which mode runs, and why not openat2", async () => {
    for (const confinement of ["auto", "path-checks"]) {
      // bind: an unprivileged agent would pick the symlink backend, which keeps it on path-checks (tested above).
      const agent = await startTestAgent({ confinement, driveBackend: "bind" });
      try {
        const health = (await (await fetch(`${agent.url}/health`)).json()) as { filesystem: unknown };
        if (confinement === "auto" && support.available) expect(health.filesystem).toEqual({ confinement: "openat2" });
        else expect(health.filesystem).toEqual({ confinement: "path-checks", reason: expect.any(String) });
      } finally {
        await agent.stop();
      }
    }
  });
  it("--confinement and SANDBOX_AGENT_CONFINEMENT select it; anything else is refused", () => {
    expect(parseAgentConfig(["--confinement", "path-checks"], {})).toMatchObject({ confinement: "path-checks" });
    expect(parseAgentConfig([], { SANDBOX_AGENT_CONFINEMENT: "openat2" })).toMatchObject({ confinement: "openat2" });
    expect(parseAgentConfig([], {})).toMatchObject({ confinement: "auto" });
    expect(() => parseAgentConfig(["--confinement", "chroot"], {})).toThrow(/--confinement/);
  });
});
