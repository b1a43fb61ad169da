import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { eventually, isAlive } from "../launcher/helpers.js";

/**
 * The warm pool under the default (isolating) launcher with an agent per sandbox (`--agent-mode process`; the agent host keeps none): sandboxes started ahead of need, each taken whole by one
 * create and never reused — the next create gets another, with its own mount, PID and UTS namespaces and none of
 * the previous one's files (what computesdk's benchmark checks across iterations). /health says how many are
 * kept and ready, and what they cost the machine.
 */
const KEY = "warm-pool-admin-key";

describe.skipIf(isolationUnavailable !== undefined)(`the warm pool${isolationUnavailable ? ` [SKIPPED: ${isolationUnavailable}]` : ""}`, () => {
  let sim: ServedSimulator;
  beforeAll(async () => {
    sim = await serveSimulator({
      port: 0,
      imageSource: "host",
      apiKey: KEY,
      logLevel: "silent",
      sandboxRetentionMs: 0,
      warmSandboxes: 2,
      agentMode: "process",
    });
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it("each create takes a fresh warm sandbox: a marker file, the namespaces and the hostname never carry over", async () => {
    const health = async () =>
      (
        (await (await fetch(`${sim.url}/health`)).json()) as {
          sandboxes: { starts: Record<string, number>; warm: { size: number; idle: number; memoryMiB: number } };
        }
      ).sandboxes;
    const before = await health();
    expect(before.starts).toMatchObject({ starting: 0, queued: 0 });
    expect(before.starts.concurrency).toBeGreaterThanOrEqual(2);
    expect(before.warm.size).toBe(2);

    const sdk = await sdkForSimulator(sim.env);
    const identity =
      "echo $(hostname) $(readlink /proc/self/ns/mnt) $(readlink /proc/self/ns/pid) $(readlink /proc/self/ns/uts); test -e /tmp/marker && echo marker-present || echo marker-absent";
    const seen: string[] = [];
    for (const name of ["warm-a", "warm-b", "warm-c"]) {
      const sandbox = await sdk.SandboxInstance.create({ name });
      const out = (await sandbox.process.exec({ command: `${identity}; echo mine > /tmp/marker`, waitForCompletion: true })).stdout!.trim();
      seen.push(out);
      await sdk.SandboxInstance.delete(name);
    }
    for (const out of seen) expect(out).toMatch(/marker-absent$/);
    const [hosts, mnt, pid, uts] = [0, 1, 2, 3].map((i) => new Set(seen.map((line) => line.split(" ")[i])));
    expect(hosts!.size).toBe(3);
    expect(mnt!.size).toBe(3);
    expect(pid!.size).toBe(3);
    expect(uts!.size).toBe(3);

    // Refilled in the background; the idle ones cost the machine some memory, reported as their PSS.
    for (let waited = 0; (await health()).warm.idle < 2 && waited < 30_000; waited += 200) await new Promise((r) => setTimeout(r, 200));
    const after = await health();
    expect(after.warm.memoryMiB).toBeGreaterThan(0);
    const pids = sim.agents.warmPool()!.pids;
    expect(pids.length).toBe(2);
    await sim.stop();
    await eventually(() => pids.every((p) => !isAlive(p)));
    expect(pids.filter((p) => isAlive(p))).toEqual([]);
  }, 120_000);
});
