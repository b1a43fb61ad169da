import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ProcessLauncher, type AgentHandle, type LaunchSpec, type Launcher } from "../../../simulator/launcher/index.js";
import { isAlive } from "../launcher/helpers.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * What the platform's own SDK integration tests (sdk-typescript
 * tests/integration/sandbox/lifecycle.test.ts) do, through the unmodified
 * @blaxel/core against the simulator with real agents: updateSandbox with
 * the body that test builds (the current spec spread beside metadata and
 * spec) reboots the sandbox with its new envs and a fresh filesystem; a ttl
 * counts from the moment the create answers, so a cold start does not eat it.
 * The simulator's clock is frozen (test hooks) so no assertion depends on
 * how fast this machine is; a slow cold start is played by holding the
 * launch while the clock moves.
 */
type Sdk = typeof import("@blaxel/core");
const KEY = "sdk-platform-admin-key";
const WS = "sdk-platform";

/** The process launcher, with a gate a test can hold the next start at. */
class GatedLauncher implements Launcher {
  readonly name = "gated-process";
  private readonly inner = new ProcessLauncher();
  private gate: { reached: () => void; release: Promise<void> } | undefined;

  /** Every agent this launcher started: none may outlive the simulator. */
  readonly pids: number[] = [];

  async start(spec: LaunchSpec): Promise<AgentHandle> {
    const gate = this.gate;
    if (gate) {
      this.gate = undefined;
      gate.reached();
      await gate.release;
    }
    const handle = await this.inner.start(spec);
    if (handle.pid) this.pids.push(handle.pid);
    return handle;
  }

  hold(): { reached: Promise<void>; release: () => void } {
    let release!: () => void;
    let reached!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    this.gate = { reached, release: new Promise<void>((r) => (release = r)) };
    return { reached: reachedP, release };
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }
}

let sim: ServedSimulator;
let sdk: Sdk;
const launcher = new GatedLauncher();

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: WS, testHooks: true, logLevel: "silent" }, { launcher });
  sdk = await sdkForSimulator(sim.env);
  const frozen = await fetch(`${sim.url}/_sim/clock`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ freeze: true }),
  });
  expect(frozen.status).toBe(200);
});
afterAll(async () => {
  await sim?.stop();
  expect(launcher.pids.length).toBeGreaterThan(0);
  expect(launcher.pids.filter((pid) => isAlive(pid))).toEqual([]);
});

async function advanceClock(ms: number): Promise<void> {
  const res = await fetch(`${sim.url}/_sim/clock`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ advanceMs: ms }),
  });
  expect(res.status).toBe(200);
}

/** Creates a sandbox whose start is held while the simulator's clock moves `coldStartMs` (a slow cold start). */
async function createWithColdStart(config: Parameters<Sdk["SandboxInstance"]["create"]>[0], coldStartMs: number) {
  const held = launcher.hold();
  const creating = sdk.SandboxInstance.create(config);
  await held.reached;
  await advanceClock(coldStartMs);
  held.release();
  return creating;
}

describe("the SDK's lifecycle tests against sandbox-sim", () => {
  it("updateSandbox with the current spec spread beside metadata and spec reboots: files cleared, new envs in place", async () => {
    const name = "update-envs";
    const sandbox = await sdk.SandboxInstance.create({ name, envs: [{ name: "TEST_VAR", value: "initial_value" }] });
    await sandbox.fs.write("/tmp/envs-test-file.txt", "before the reboot");
    expect(await sandbox.fs.read("/tmp/envs-test-file.txt")).toBe("before the reboot");
    const pid = sim.agents.get(WS, name)!.pid;

    const current = await sdk.SandboxInstance.get(name);
    // Exactly the body of the SDK's test: the spec's fields (runtime, region...) also at the top level.
    const body = {
      ...current.spec,
      metadata: current.metadata,
      spec: {
        ...current.spec,
        runtime: {
          ...current.spec.runtime,
          envs: [
            { name: "TEST_VAR", value: "updated_value" },
            { name: "NEW_VAR", value: "new_value" },
          ],
        },
      },
    } as Parameters<Sdk["updateSandbox"]>[0]["body"];
    const { data: updated } = await sdk.updateSandbox({ path: { sandboxName: name }, body, throwOnError: true });
    expect(updated.status).toBe("DEPLOYED");
    expect(updated.spec.runtime?.envs).toEqual([
      { name: "TEST_VAR", value: "updated_value" },
      { name: "NEW_VAR", value: "new_value" },
    ]);
    expect((updated.events ?? []).map((e) => e.message)).toContain("spec.runtime.envs changed: rebooting the sandbox (its files are reset)");
    expect(sim.agents.get(WS, name)!.pid).not.toBe(pid);

    const after = await sdk.SandboxInstance.get(name);
    expect(after.status).toBe("DEPLOYED");
    await expect(after.fs.read("/tmp/envs-test-file.txt")).rejects.toThrow();
    const result = await after.process.exec({ command: "echo $TEST_VAR $NEW_VAR", waitForCompletion: true });
    expect(result.stdout?.trim()).toBe("updated_value new_value");
    await sdk.SandboxInstance.delete(name);
  });

  it("a spec update that changes nothing the sandbox runs with keeps its files (updateTtl, labels)", async () => {
    const name = "update-ttl";
    const sandbox = await sdk.SandboxInstance.create({ name, ttl: "10m" });
    await sandbox.fs.write("/tmp/ttl-test-file.txt", "kept");
    await sdk.SandboxInstance.updateTtl(name, "30m");
    expect(await (await sdk.SandboxInstance.get(name)).fs.read("/tmp/ttl-test-file.txt")).toBe("kept");
    await sdk.SandboxInstance.delete(name);
  });

  it("ttl counts from the moment the create answers: a 1s sandbox whose cold start took 5 s is usable, and TERMINATED 1.1 s later", async () => {
    const name = "ttl-string-expire";
    const first = await createWithColdStart({ name, ttl: "1s" }, 5_000);
    expect(first.status).toBe("DEPLOYED");
    await first.fs.write("/tmp/ttl-string-test-marker.txt", "this-should-not-persist");
    expect(await first.fs.read("/tmp/ttl-string-test-marker.txt")).toBe("this-should-not-persist");
    expect((await sdk.SandboxInstance.get(name)).expiresIn).toBe(1);

    await advanceClock(1_100);
    expect((await sdk.SandboxInstance.get(name)).status).toBe("TERMINATED");
    const second = await sdk.SandboxInstance.create({ name });
    expect(second.metadata.name).toBe(name);
    await expect(second.fs.read("/tmp/ttl-string-test-marker.txt")).rejects.toThrow();
    await sdk.SandboxInstance.delete(name);
  });

  it("ttl-max-age and ttl-idle count from then too; an expires date stays absolute", async () => {
    const maxAge = await createWithColdStart(
      { name: "maxage-expire", lifecycle: { expirationPolicies: [{ type: "ttl-max-age", value: "1s", action: "delete" }] } },
      3_000,
    );
    await maxAge.fs.write("/tmp/marker.txt", "usable");
    expect(await maxAge.fs.read("/tmp/marker.txt")).toBe("usable");
    const idle = await createWithColdStart(
      { name: "idle-expire", lifecycle: { expirationPolicies: [{ type: "ttl-idle", value: "5s", action: "delete" }] } },
      10_000,
    );
    await idle.fs.write("/tmp/marker.txt", "usable");
    expect(await idle.fs.read("/tmp/marker.txt")).toBe("usable");
    const dated = await createWithColdStart({ name: "expires-date", expires: new Date(sim.deps.clock.now() + 2_000) }, 3_000);
    expect(dated.status).toBe("DEPLOYED");

    await advanceClock(1_100);
    expect((await sdk.SandboxInstance.get("maxage-expire")).status).toBe("TERMINATED");
    expect((await sdk.SandboxInstance.get("expires-date")).status).toBe("TERMINATED");
    expect((await sdk.SandboxInstance.get("idle-expire")).status).toBe("DEPLOYED");
    await advanceClock(6_000);
    expect((await sdk.SandboxInstance.get("idle-expire")).status).toBe("TERMINATED");
  });
});
