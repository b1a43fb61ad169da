import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { eventually } from "../../sandbox-agent/schedules/eventually.js";

/**
 * The SDK's system.upgrade() on a sandbox of the simulator, under the process launcher and the default
 * (isolating) one: the agent is replaced while `sh -c 'sleep 3; echo done'` runs, the sandbox stays
 * running for its owner (same agent process, no crash or restart), and the command completes with its
 * output and exit code. (npm run build first: the agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** `pid` and every process below it, from the kernel's parent links. */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, ppid] of parent) if (ppid === out[i]) out.push(child);
  return out;
}

/** One simulator per test file: @blaxel/core reads its settings once per process (upgrade-process.test.ts runs the other launcher). */
export function upgradeUnder(launcher: "process" | "default"): void {
  const skip = launcher === "default" && isolationUnavailable;
  describe.skipIf(skip)(`POST /upgrade under the ${launcher} launcher${skip ? ` (skipped: ${isolationUnavailable})` : ""}`, () => {
    let sim: ServedSimulator;
    let sdk: Sdk;
    const workspace = `upgrade-${launcher}`;
    beforeAll(async () => {
      sim = await serveSimulator({
        port: 0,
        imageSource: "host",
        apiKey: `upgrade-${launcher}-admin-key`,
        workspace,
        logLevel: "silent",
        ...(launcher === "process" ? { launcher: "process" } : {}),
      });
      sdk = await sdkForSimulator(sim.env);
    });
    afterAll(async () => {
      await sim?.stop();
    });

    it("replaces the agent while a command runs; the command completes with its output and exit code", async () => {
      const sandbox = await sdk.SandboxInstance.create({ name: `up-${launcher}` });
      const supervisor = () => sim.agents.get(workspace, `up-${launcher}`);
      const pid = supervisor()!.pid;
      const events: string[] = [];
      const health = async () => {
        const res = await fetch(`${sandbox.metadata.url}/health`, { headers: sdk.settings.headers }).catch(() => undefined);
        return res?.ok ? ((await res.json()) as { upgradeCount: number; lastUpgrade: { status: string } }) : undefined;
      };
      await sandbox.process.exec({ name: "sleeper", command: "sh -c 'sleep 3; echo done'", waitForCompletion: false });
      expect(await sandbox.system.upgrade({ version: "latest" })).toMatchObject({ message: "Upgrade initiated" });
      const upgraded = await eventually(
        async () => {
          const h = await health();
          events.push(supervisor()?.state ?? "gone");
          return h && h.upgradeCount > 0 ? h : undefined;
        },
        30_000,
        "upgradeCount 1",
      );
      expect(upgraded.lastUpgrade.status).toBe("completed");
      // Whatever owns the agent saw no death: the same process, running all along.
      expect(supervisor()!.pid).toBe(pid);
      expect(events.every((s) => s === "running")).toBe(true);
      const done = await sandbox.process.wait("sleeper", { maxWait: 30_000, interval: 200 });
      expect(done).toMatchObject({ status: "completed", exitCode: 0 });
      expect(await sandbox.process.logs("sleeper")).toBe("done\n");
      expect((await sandbox.process.exec({ command: "echo still here", waitForCompletion: true })).logs).toBe("still here\n");
      // Deleting the sandbox ends the agent's process, the agent it handed over to and everything below.
      const tree = descendants(pid!);
      expect(tree.length).toBeGreaterThan(1);
      await sdk.SandboxInstance.delete(`up-${launcher}`);
      await eventually(async () => tree.every((p) => !alive(p)), 20_000, "every process of the sandbox gone");
    }, 120_000);
  });
}
