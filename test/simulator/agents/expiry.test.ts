import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";

/**
 * Ttl, expires and expiration policies are applied on the
 * simulator clock. Moving it with the test hooks expires a real sandbox:
 * its agent stops and its files are retired, as a delete does; its record
 * stays TERMINATED with the events saying why for its terminatedRetention.
 * (npm run build first: the agents run from dist/.)
 */
const KEY = "expiry-admin-key";
const HOUR = 3_600_000;
let sim: ServedSimulator;
beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent" });
});
afterAll(async () => {
  await sim?.stop();
});

const auth = (r: request.Test) => r.set("authorization", `Bearer ${KEY}`).set("x-blaxel-workspace", "default");
const create = (body: unknown) =>
  auth(request(sim.url).post("/v0/sandboxes"))
    .send(body as object)
    .expect(200);
const get = (name: string) => auth(request(sim.url).get(`/v0/sandboxes/${name}`));
const advance = (ms: number) => request(sim.url).post("/_sim/clock").send({ advanceMs: ms }).expect(200);

describe("sandbox expiry with real agents", () => {
  it("a sandbox past its spec.runtime.ttl is deleted: agent stopped, files retired, TERMINATED with events, others untouched", async () => {
    await create({ metadata: { name: "short-ttl" }, spec: { runtime: { ttl: "1h" } } });
    await create({ metadata: { name: "no-ttl" } });
    await create({ metadata: { name: "idle-one" }, spec: { lifecycle: { expirationPolicies: [{ type: "ttl-idle", value: "3h", action: "delete" }] } } });
    const dir = sim.agents.sandboxDir("default", "short-ttl");
    expect(sim.agents.get("default", "short-ttl")?.state).toBe("running");

    const early = await advance(HOUR - 60_000);
    expect(early.body.expired).toEqual([]);
    await get("short-ttl").expect(200);

    // Used through the proxy now: its idle time starts again, and lastUsedAt says when.
    const before = sim.deps.clock.now();
    expect((await get("idle-one").expect(200)).body.lastUsedAt).toBeUndefined();
    await auth(request(sim.url).post("/sbx/default/idle-one/process")).send({ command: "true", waitForCompletion: true }).expect(200);
    const lastUsedAt = Date.parse((await get("idle-one").expect(200)).body.lastUsedAt);
    expect(lastUsedAt).toBeGreaterThanOrEqual(before);
    expect(lastUsedAt).toBeLessThanOrEqual(sim.deps.clock.now());

    const due = await advance(2 * 60_000);
    expect(due.body.expired).toEqual([{ workspace: "default", sandbox: "short-ttl", reason: "spec.runtime.ttl 1h reached" }]);
    const terminated = await get("short-ttl").expect(200);
    expect(terminated.body.status).toBe("TERMINATED");
    expect(terminated.body.events.slice(-2)).toMatchObject([
      { status: "DELETING", message: "expired: spec.runtime.ttl 1h reached; deleting the sandbox" },
      { status: "TERMINATED", message: "terminated: the expired sandbox's agent is stopped and its files are retired" },
    ]);
    expect(sim.agents.get("default", "short-ttl")).toBeUndefined();
    await expect.poll(() => existsSync(dir)).toBe(false);
    expect(sim.agents.get("default", "no-ttl")?.state).toBe("running");
    // Hidden from lists unless asked for, as the platform does.
    const names = async (q: string) =>
      (await auth(request(sim.url).get(`/v0/sandboxes${q}`)).expect(200)).body.map((s: { metadata: { name: string } }) => s.metadata.name);
    expect(await names("")).not.toContain("short-ttl");
    expect(await names("?showTerminated=true")).toContain("short-ttl");

    // ttl-idle counts from the last use (the proxied call above), not from creation.
    expect((await advance(2 * HOUR)).body.expired).toEqual([]);
    expect((await get("idle-one").expect(200)).body.status).toBe("DEPLOYED");
    const idle = await advance(HOUR);
    expect(idle.body.expired).toMatchObject([{ sandbox: "idle-one", reason: expect.stringMatching(/^expiration policy ttl-idle 3h: idle since /) }]);
    expect(sim.agents.get("default", "idle-one")).toBeUndefined();

    // The TERMINATED record goes once terminatedRetention (default 5m) has passed.
    await advance(5 * 60_000);
    await get("short-ttl").expect(404);
    await get("idle-one").expect(404);
  });

  it("the name of an expired sandbox can be reused at once: a new sandbox with a new agent", async () => {
    await create({ metadata: { name: "reborn" }, spec: { runtime: { ttl: "10m" } } });
    expect((await advance(10 * 60_000 + 1)).body.expired).toMatchObject([{ sandbox: "reborn" }]);
    expect((await get("reborn").expect(200)).body.status).toBe("TERMINATED");
    const again = await create({ metadata: { name: "reborn" } });
    expect(again.body.status).toBe("DEPLOYED");
    expect(sim.agents.get("default", "reborn")?.state).toBe("running");
    expect((await advance(HOUR)).body.expired).toEqual([]);
    await auth(request(sim.url).delete("/v0/sandboxes/reborn")).expect(200);
  });

  it("spec.runtime.expires set by an update expires it at that date", async () => {
    await create({ metadata: { name: "dated" } });
    const at = new Date(sim.deps.clock.now() + 10 * 60_000).toISOString();
    const current = (await get("dated").expect(200)).body;
    await auth(request(sim.url).put("/v0/sandboxes/dated"))
      .send({ metadata: { name: "dated" }, spec: { ...current.spec, runtime: { ...current.spec.runtime, expires: at } } })
      .expect(200);
    expect((await advance(10 * 60_000 + 1)).body.expired).toEqual([{ workspace: "default", sandbox: "dated", reason: `spec.runtime.expires ${at} reached` }]);
    expect((await get("dated").expect(200)).body.status).toBe("TERMINATED");
    expect(sim.agents.get("default", "dated")).toBeUndefined();
  });
});

describe("a simulator restarted with --data", () => {
  it("expires what came due while it was down, without starting its agent", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sim-expiry-"));
    const config = {
      port: 0,
      imageSource: "host" as const,
      apiKey: "expiry-restart-key",
      data: join(dir, "sim.db"),
      testHooks: true,
      logLevel: "silent" as const,
    };
    const headers = { authorization: `Bearer ${config.apiKey}`, "content-type": "application/json", "x-blaxel-workspace": "default" };
    try {
      const first = await serveSimulator(config);
      // The first run lives in 2020 (test-hook clock), so the sandbox's date is not yet due there.
      await request(first.url).post("/_sim/clock").send({ set: "2020-01-01T00:00:00Z" }).expect(200);
      const created = await fetch(`${first.url}/v0/sandboxes`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          metadata: { name: "outlived" },
          spec: { lifecycle: { expirationPolicies: [{ type: "date", value: "2021-01-01T00:00:00Z", action: "delete" }] } },
        }),
      });
      expect(created.status).toBe(200);
      await fetch(`${first.url}/v0/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "lasting" } }) });
      await first.stop();

      // The second run is back on real time, long past that date.
      const second = await serveSimulator(config);
      try {
        const got = (await (await fetch(`${second.url}/v0/sandboxes/outlived`, { headers })).json()) as { status: string; events: { message: string }[] };
        expect(got.status).toBe("TERMINATED");
        expect(got.events.map((e) => e.message)).toContain("expired: expiration policy date 2021-01-01T00:00:00Z reached; deleting the sandbox");
        expect(got.events.map((e) => e.message)).not.toContain("the simulator restarted: starting the sandbox agent again");
        expect(second.agents.get("default", "outlived")).toBeUndefined();
        expect(second.agents.get("default", "lasting")).toBeDefined();
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
