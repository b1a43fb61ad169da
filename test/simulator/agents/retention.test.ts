import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { RetiredSandboxes } from "../../../simulator/agents/retention.js";
import { parseSimConfig } from "../../../simulator/config.js";
import { eventually } from "../launcher/helpers.js";

/**
 * Delete stops the sandbox's agent and keeps its files for --sandbox-retention
 * on the simulator's clock; the sweeper removes them once due.
 * (npm run build first: the agents run from dist/.)
 */
const KEY = "retention-admin-key-1";

function client(sim: ServedSimulator) {
  return async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
    const res = await fetch(`${sim.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "default", ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: await res.json() };
  };
}

describe("--sandbox-retention", () => {
  it("parses durations and 0, defaults to 1h, names the flag when wrong", () => {
    expect((parseSimConfig([], {}) as { sandboxRetentionMs: number }).sandboxRetentionMs).toBe(3_600_000);
    expect((parseSimConfig(["--sandbox-retention", "0"], {}) as { sandboxRetentionMs: number }).sandboxRetentionMs).toBe(0);
    expect((parseSimConfig(["--sandbox-retention", "7d"], {}) as { sandboxRetentionMs: number }).sandboxRetentionMs).toBe(7 * 86_400_000);
    expect((parseSimConfig([], { SANDBOX_SIM_SANDBOX_RETENTION: "30m" }) as { sandboxRetentionMs: number }).sandboxRetentionMs).toBe(1_800_000);
    expect(() => parseSimConfig(["--sandbox-retention", "soon"], {})).toThrow(/--sandbox-retention/);
  });
});

describe("retired sandboxes (unit, injected clock)", () => {
  it("keeps files until due, then the periodic sweeper removes them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "retired-"));
    try {
      let now = 1_000;
      const retired = new RetiredSandboxes(dir, () => now);
      mkdirSync(join(dir, "box", "root"), { recursive: true });
      writeFileSync(join(dir, "box", "root", "f.txt"), "x");
      const path = retired.retire("ws", "box", join(dir, "box"), now + 500);
      expect(existsSync(join(dir, "box"))).toBe(false);
      expect(retired.list()).toEqual([{ workspace: "ws", sandbox: "box", dueMs: 1_500, path }]);
      expect(retired.sweep()).toEqual([]);
      expect(readFileSync(join(path, "root", "f.txt"), "utf8")).toBe("x");
      retired.startSweeping(20);
      now = 1_500;
      await eventually(() => !existsSync(path), 2_000);
      retired.stopSweeping();
      expect(retired.list()).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("sandbox delete with real agents", () => {
  let sim: ServedSimulator;
  let call: ReturnType<typeof client>;
  beforeAll(async () => {
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent", sandboxRetentionMs: 3_600_000 });
    call = client(sim);
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it("stops the agent, keeps the files for the retention period on the simulator clock, then removes them", async () => {
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "kept" } })).status).toBe(200);
    const pid = sim.agents.get("default", "kept")!.pid!;
    expect(
      (
        await fetch(`${sim.url}/sbx/default/kept/filesystem/note.txt`, {
          method: "PUT",
          headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ content: "old" }),
        })
      ).status,
    ).toBe(200);
    expect((await call("DELETE", "/v0/sandboxes/kept")).status).toBe(200);
    await eventually(() => sim.agents.retired.list().some((r) => r.sandbox === "kept"));
    expect(() => process.kill(pid, 0)).toThrow(); // the agent is gone
    const [item] = sim.agents.retired.list().filter((r) => r.sandbox === "kept");
    expect(readFileSync(join(item!.path, "root", "note.txt"), "utf8")).toBe("old");

    // The name is free at once: a new sandbox of that name starts clean.
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "kept" } })).status).toBe(200);
    expect((await fetch(`${sim.url}/sbx/default/kept/filesystem/note.txt`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(404);

    sim.agents.sweep();
    expect(existsSync(item!.path)).toBe(true); // not due yet
    expect((await call("POST", "/_sim/clock", { advanceMs: 3_600_001 })).status).toBe(200);
    expect(sim.agents.sweep()).toEqual([{ workspace: "default", sandbox: "kept" }]);
    expect(existsSync(item!.path)).toBe(false);
    // The running sandbox of the same name is untouched.
    expect(sim.agents.get("default", "kept")?.state).toBe("running");
  });
});

describe("sandbox delete with retention 0", () => {
  let sim: ServedSimulator;
  let call: ReturnType<typeof client>;
  beforeAll(async () => {
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, logLevel: "silent", sandboxRetentionMs: 0 });
    call = client(sim);
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it("removes the files at once, after unmounting the sandbox's drives (whose files stay)", async () => {
    expect((await call("POST", "/v0/drives", { metadata: { name: "keep" } })).status).toBe(200);
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "gone" } })).status).toBe(200);
    const sbx = (path: string, init: RequestInit = {}) =>
      fetch(`${sim.url}/sbx/default/gone${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" } });
    expect((await sbx("/drives/mount", { method: "POST", body: JSON.stringify({ driveName: "keep", mountPath: "/mnt/keep" }) })).status).toBe(200);
    expect((await sbx("/filesystem/mnt/keep/data.txt", { method: "PUT", body: JSON.stringify({ content: "on the drive" }) })).status).toBe(200);
    const dir = sim.agents.sandboxDir("default", "gone");
    expect((await call("DELETE", "/v0/sandboxes/gone")).status).toBe(200);
    await eventually(() => !existsSync(dir) && sim.agents.retired.list().length === 0);
    expect(readFileSync(join(sim.agents.drivesDir("default"), "keep", "data.txt"), "utf8")).toBe("on the drive");
    // Nothing mounts the drive any more: it can be deleted.
    expect((await call("DELETE", "/v0/drives/keep")).status).toBe(200);
  });
});
