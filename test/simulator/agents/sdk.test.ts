import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { eventually } from "../launcher/helpers.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * @blaxel/core, unmodified, against the simulator with real agents: every
 * sandbox-local call goes through metadata.url → the proxy → that sandbox's agent.
 */
type Sdk = typeof import("@blaxel/core");
let sim: ServedSimulator;
let sdk: Sdk;

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: "sdk-agents-admin-key", workspace: "sdk-agents", logLevel: "silent" });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

describe("@blaxel/core against sandbox-sim with real agents", () => {
  it("creates a sandbox whose filesystem and processes are a real agent's, then deletes it", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "real-one", envs: [{ name: "GREETING", value: "hello" }] });
    expect(sandbox.metadata.url).toBe(`${sim.url}/sbx/sdk-agents/real-one`);
    // Create answered only once the agent was healthy.
    expect(sim.agents.get("sdk-agents", "real-one")?.state).toBe("running");
    await sandbox.fs.write("/data/note.txt", "written through the proxy");
    expect(await sandbox.fs.read("/data/note.txt")).toBe("written through the proxy");
    // Commands start in the sandbox's `/` (its root directory), so a relative path names the same file.
    const run = await sandbox.process.exec({ command: "echo $GREETING from $(cat data/note.txt | wc -c) bytes", waitForCompletion: true });
    expect(run.logs?.trim() ?? run.stdout?.trim()).toBe("hello from 25 bytes");

    const dir = sim.agents.sandboxDir("sdk-agents", "real-one");
    expect(existsSync(dir)).toBe(true);
    await sdk.SandboxInstance.delete("real-one");
    await eventually(() => !existsSync(dir));
    expect(sim.agents.get("sdk-agents", "real-one")).toBeUndefined();
  });

  it("archive stops the agent and keeps the files; unarchive brings it back on them", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "archived-one" });
    expect(sandbox.status).toBe("DEPLOYED");
    await sandbox.fs.write("/kept.txt", "through an archive");
    await sandbox.archive();
    expect(sandbox.status).toBe("ARCHIVED");
    expect(sim.agents.get("sdk-agents", "archived-one")).toBeUndefined();
    await sandbox.unarchive();
    expect(sandbox.status).toBe("DEPLOYED");
    expect(sim.agents.get("sdk-agents", "archived-one")?.state).toBe("running");
    expect(await sandbox.fs.read("/kept.txt")).toBe("through an archive");
    await sdk.SandboxInstance.delete("archived-one");
  });

  it("updateTtl and updateLifecycle set and clear (the SDK sends null to clear) without touching the agent", async () => {
    await sdk.SandboxInstance.create({ name: "ttl-one" });
    const pid = sim.agents.get("sdk-agents", "ttl-one")!.pid;
    const withTtl = await sdk.SandboxInstance.updateTtl("ttl-one", "2h");
    expect(withTtl.spec.runtime?.ttl).toBe("2h");
    const cleared = await sdk.SandboxInstance.updateTtl("ttl-one", "");
    expect(cleared.spec.runtime?.ttl).toBeUndefined();
    const lifecycle = await sdk.SandboxInstance.updateLifecycle("ttl-one", { expirationPolicies: [{ type: "ttl-idle", value: "1h", action: "delete" }] });
    expect(lifecycle.spec.lifecycle).toMatchObject({ expirationPolicies: [{ type: "ttl-idle", value: "1h" }] });
    const noLifecycle = await sdk.SandboxInstance.updateLifecycle("ttl-one", null);
    expect(noLifecycle.spec.lifecycle).toBeUndefined();
    expect(noLifecycle.status).toBe("DEPLOYED");
    expect(sim.agents.get("sdk-agents", "ttl-one")!.pid).toBe(pid);
    await sdk.SandboxInstance.delete("ttl-one");
  });

  it("a crashed agent shows in the sandbox's events and status, and comes back", async () => {
    await sdk.SandboxInstance.create({ name: "crashes" });
    const sandbox = await sdk.SandboxInstance.get("crashes");
    await sandbox.fs.write("/kept.txt", "survives a crash");
    const pid = sim.agents.get("sdk-agents", "crashes")!.pid!;
    process.kill(pid, "SIGKILL");
    await eventually(() => sim.agents.get("sdk-agents", "crashes")!.state === "running" && sim.agents.get("sdk-agents", "crashes")!.pid !== pid);
    const after = await sdk.SandboxInstance.get("crashes");
    const events = (after.events ?? []) as { status: string; message: string }[];
    expect(events.some((e) => /agent crashed \(signal SIGKILL\)/.test(e.message))).toBe(true);
    expect(events.some((e) => /agent restarted/.test(e.message))).toBe(true);
    expect(after.status).toBe("DEPLOYED");
    expect(await after.fs.read("/kept.txt")).toBe("survives a crash");
  });
});

describe("a simulator restarted with --data", () => {
  it("brings its sandboxes' agents back, with their files", async () => {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = mkdtempSync(join(tmpdir(), "sim-data-"));
    const config = { port: 0, imageSource: "host" as const, apiKey: "restart-admin-key-1", data: join(dir, "sim.db"), logLevel: "silent" as const };
    try {
      const first = await serveSimulator(config);
      const headers = { authorization: `Bearer ${config.apiKey}`, "content-type": "application/json", "x-blaxel-workspace": "default" };
      expect((await fetch(`${first.url}/v0/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "durable" } }) })).status).toBe(200);
      const put = await fetch(`${first.url}/sbx/default/durable/filesystem/kept.txt`, {
        method: "PUT",
        headers,
        body: JSON.stringify({ content: "across restarts" }),
      });
      expect(put.status).toBe(200);
      // An archived sandbox stays archived across the restart: no agent, files kept for its unarchive.
      expect((await fetch(`${first.url}/v0/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "shelved" } }) })).status).toBe(200);
      await fetch(`${first.url}/sbx/default/shelved/filesystem/note.txt`, { method: "PUT", headers, body: JSON.stringify({ content: "shelved" }) });
      expect((await fetch(`${first.url}/v0/sandboxes/shelved/archive`, { method: "POST", headers })).status).toBe(200);
      await first.stop();

      const second = await serveSimulator(config);
      try {
        const get = await fetch(`${second.url}/sbx/default/durable/filesystem/kept.txt`, { headers });
        expect(get.status).toBe(200);
        expect(((await get.json()) as { content: string }).content).toBe("across restarts");
        const durable = (await (await fetch(`${second.url}/v0/sandboxes/durable`, { headers })).json()) as { status: string; events: { message: string }[] };
        expect(durable.status).toBe("DEPLOYED");
        expect(durable.events.map((e) => e.message).slice(-2)).toEqual([
          "the simulator restarted: starting the sandbox agent again",
          "sandbox agent is healthy",
        ]);
        expect(second.agents.get("default", "shelved")).toBeUndefined();
        expect(((await (await fetch(`${second.url}/v0/sandboxes/shelved`, { headers })).json()) as { status: string }).status).toBe("ARCHIVED");
        expect((await fetch(`${second.url}/v0/sandboxes/shelved/unarchive`, { method: "POST", headers })).status).toBe(200);
        const note = await fetch(`${second.url}/sbx/default/shelved/filesystem/note.txt`, { headers });
        expect(((await note.json()) as { content: string }).content).toBe("shelved");
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
