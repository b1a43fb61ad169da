import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";
import { sandboxAt } from "../../helpers/sdk.js";
import { eventually } from "../schedules/eventually.js";
import { successorArgv } from "../../../sandbox-agent/system/upgrade.js";

/** POST /upgrade through @blaxel/core's system.upgrade() on a real agent process (dist/: npm run build first). */
const TOKEN = "upgrade-token";
const agents: AgentProcess[] = [];
afterEach(async () => {
  for (const a of agents.splice(0)) {
    if (a.child.exitCode === null && a.child.signalCode === null) a.child.kill("SIGTERM");
    await a.exited;
  }
});

/** Children of a process (its agent successor), from the kernel. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function health(url: string): Promise<{ upgradeCount: number; lastUpgrade: { status: string; step: string; version: string } } | undefined> {
  try {
    const res = await fetch(`${url}/health`);
    return res.ok ? ((await res.json()) as never) : undefined;
  } catch {
    return undefined; // the short gap while the new agent takes over
  }
}

describe("POST /upgrade", () => {
  it("replaces the agent without stopping a running command: it completes with its output and exit code; /health counts", async () => {
    const base = tempDir();
    const agent = await spawnAgent(["--root", join(base, "root"), "--data-dir", join(base, "data"), "--token", TOKEN]);
    agents.push(agent);
    const sandbox = await sandboxAt(agent.url, "upgrade", { apiKey: TOKEN });
    expect(await health(agent.url)).toMatchObject({ upgradeCount: 0, lastUpgrade: { status: "idle", step: "none", version: "" } });

    const started = await sandbox.process.exec({ name: "sleeper", command: "sh -c 'sleep 3; echo done'", waitForCompletion: false });
    const commandPid = Number(started.pid);
    expect(started.status).toBe("running");
    const result = await sandbox.system.upgrade({ version: "latest" });
    expect(result).toEqual({ path: "", message: "Upgrade initiated" });

    const after = await eventually(
      async () => {
        const h = await health(agent.url);
        return h && h.upgradeCount > 0 ? h : undefined;
      },
      30_000,
      "upgradeCount 1",
    );
    expect(after).toMatchObject({ upgradeCount: 1, lastUpgrade: { status: "completed", step: "completed", version: expect.any(String) } });
    // The process the launcher started lives on (whatever owns it sees no death), the new agent is its child.
    expect(agent.child.exitCode).toBeNull();
    const [successor] = childrenOf(agent.child.pid!).filter((pid) => pid !== commandPid);
    expect(successor).toBeGreaterThan(0);

    // The command was adopted by the new agent and ends as it would have: completed, exit 0, its output whole.
    expect((await sandbox.process.get("sleeper")).status).toBe("running");
    const done = await sandbox.process.wait("sleeper", { maxWait: 30_000, interval: 200 });
    expect(done).toMatchObject({ status: "completed", exitCode: 0 });
    expect(await sandbox.process.logs("sleeper")).toBe("done\n");
    // New commands run under the new agent.
    const echo = await sandbox.process.exec({ command: "echo after", waitForCompletion: true });
    expect(echo.logs).toBe("after\n");

    // A second upgrade: counted again.
    await sandbox.system.upgrade({});
    await eventually(async () => (await health(agent.url))?.upgradeCount === 2, 30_000, "upgradeCount 2");
    expect((await sandbox.process.get("sleeper")).exitCode).toBe(0);

    // SIGTERM to the process the launcher owns stops the agent it handed over to; nothing outlives it.
    const chain = [successor!, ...childrenOf(successor!)];
    agent.child.kill("SIGTERM");
    expect(await agent.exited).toBe(0);
    await eventually(async () => chain.every((pid) => !alive(pid)), 10_000, "the successors gone");
  }, 120_000);

  it("a keeper killed with SIGKILL takes its successor with it", async () => {
    const base = tempDir();
    const agent = await spawnAgent(["--root", join(base, "root"), "--data-dir", join(base, "data"), "--token", TOKEN]);
    agents.push(agent);
    const sandbox = await sandboxAt(agent.url, "upgrade-kill", { apiKey: TOKEN });
    await sandbox.system.upgrade({});
    await eventually(async () => (await health(agent.url))?.upgradeCount === 1, 30_000, "upgraded");
    const [successor] = childrenOf(agent.child.pid!);
    expect(successor).toBeGreaterThan(0);
    agent.child.kill("SIGKILL");
    await agent.exited;
    await eventually(async () => !alive(successor!), 15_000, "the successor gone with its keeper");
  }, 60_000);

  it("the successor's arguments: same address, the token on a pipe, no launcher channel", () => {
    expect(
      successorArgv(
        ["--host", "127.0.0.1", "--port", "0", "--root", "/", "--token-file", "/d/t", "--token-file-remove", "--port-handoff", "--socket", "/d/a.sock"],
        4321,
        true,
      ),
    ).toEqual(["--host", "127.0.0.1", "--root", "/", "--socket", "/d/a.sock", "--port", "4321", "--token-fd", "4"]);
    expect(successorArgv(["--port=8080", "--token", "x", "--token-fd", "3"], 8080, false)).toEqual(["--port", "8080"]);
  });
});
