import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { agentHostSupport } from "../../../simulator/agent-host/host.js";
import { eventually } from "./helpers.js";

/**
 * Isolation is the default and never silently dropped: where its tools are
 * missing (here: a PATH where none can be found) the simulator does not
 * start, and says in one line what to install or which flag to pass;
 * `--launcher process` starts it, loudly not isolated, and /health says so.
 */
const main = join(import.meta.dirname, "../../../dist/simulator/main.js");

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string; errors(): string; kill(): void }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [main, "--port", "0", "--api-key", "default-launcher-key", "--log-level", "silent", ...args], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      if (stdout.includes("BL_API_KEY")) resolve({ code: null, stdout, stderr, errors: () => stderr, kill: () => child.kill("SIGTERM") });
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.once("exit", (code) => resolve({ code, stdout, stderr, errors: () => stderr, kill: () => {} }));
  });
}

describe("the default launcher", () => {
  it("without its tools the simulator stops with one line naming what to install and the flag to pass", async () => {
    const res = await run([], { PATH: "/nonexistent" });
    expect(res.code).toBe(2);
    const lines = res.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^sandbox-sim: sandbox isolation needs bubblewrap/);
    expect(lines[0]).toContain("apt-get install -y");
    expect(lines[0]).toContain("--launcher process");
  });

  it("--launcher process starts, warning that sandboxes are not isolated, and /health says so", async () => {
    const res = await run(["--launcher", "process"], { PATH: "/nonexistent" });
    try {
      expect(res.code).toBeNull();
      await eventually(() => res.errors().includes("WARNING: sandboxes are NOT ISOLATED"));
      const url = /sandbox-sim listening on (\S+)/.exec(res.stdout)![1]!;
      const health = (await (await fetch(`${url}/health`)).json()) as { sandboxes: { launcher: string; isolated: boolean } };
      expect(health.sandboxes).toMatchObject({ launcher: "process", isolated: false });
    } finally {
      res.kill();
    }
  });

  it("serves sandboxes from the agent host by default; the openat2 fallback forced keeps an agent per sandbox and /health says why", async () => {
    const health = async (env: NodeJS.ProcessEnv, args: string[] = []) => {
      const res = await run(args, env);
      try {
        const url = /sandbox-sim listening on (\S+)/.exec(res.stdout)?.[1];
        if (!url) return { exit: res.code, stderr: res.stderr };
        return ((await (await fetch(`${url}/health`)).json()) as { sandboxes: { agents: unknown } }).sandboxes.agents;
      } finally {
        res.kill();
      }
    };
    const host = agentHostSupport();
    if (host.available) expect(await health(process.env)).toEqual({ mode: "host" });
    else expect(await health(process.env)).toEqual({ mode: "process", reason: host.reason });
    const forced = { ...process.env, SANDBOX_AGENT_CONFINEMENT: "path-checks" };
    expect(await health(forced)).toEqual({ mode: "process", reason: expect.stringContaining("SANDBOX_AGENT_CONFINEMENT=path-checks") });
    // Asked for by name where it cannot run: a clear failure, not a silent fallback.
    const refused = (await health(forced, ["--agent-mode", "host"])) as { exit: number; stderr: string };
    expect(refused.exit).not.toBe(0);
    expect(refused.stderr).toContain("--agent-mode host: SANDBOX_AGENT_CONFINEMENT=path-checks");
  });
});
