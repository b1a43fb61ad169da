import { afterAll, describe, expect, it } from "vitest";
import { startTestSim } from "../../helpers/simulator.js";

/** Sandbox.expiresIn: seconds until the sandbox is deleted by its TTL or lifecycle, computed at each read. */
const sim = startTestSim();
afterAll(() => sim.close());

type Sandbox = { metadata: { name: string }; expiresIn?: number };
const byName = (list: Sandbox[], name: string) => list.find((s) => s.metadata.name === name);

describe("expiresIn", () => {
  it("counts down from spec.runtime.ttl on create, get and list, and is absent without a limit", async () => {
    const created = await sim.api.post("/v0/sandboxes", { metadata: { name: "ttl-1h" }, spec: { runtime: { ttl: "1h" } } }).expect(200);
    expect(created.body.expiresIn).toBe(3600);
    const plain = await sim.api.post("/v0/sandboxes", { metadata: { name: "no-limit" } }).expect(200);
    expect(plain.body).not.toHaveProperty("expiresIn");

    sim.clock.advance(600_000);
    expect((await sim.api.get("/v0/sandboxes/ttl-1h").expect(200)).body.expiresIn).toBe(3000);
    const list = (await sim.api.get("/v0/sandboxes").expect(200)).body.data as Sandbox[];
    expect(byName(list, "ttl-1h")?.expiresIn).toBe(3000);
    expect(byName(list, "no-limit")).not.toHaveProperty("expiresIn");

    // A list answered again later is not a cached copy of the first.
    sim.clock.advance(60_000);
    const later = (await sim.api.get("/v0/sandboxes").expect(200)).body.data as Sandbox[];
    expect(byName(later, "ttl-1h")?.expiresIn).toBe(2940);
  });

  it("takes the earliest limit; ttl-idle counts from the last update", async () => {
    const lifecycle = {
      expirationPolicies: [
        { type: "ttl-idle", value: "30m", action: "delete" },
        { type: "ttl-max-age", value: "2h", action: "delete" },
      ],
    };
    await sim.api.post("/v0/sandboxes", { metadata: { name: "idle" }, spec: { lifecycle } }).expect(200);
    sim.clock.advance(20 * 60_000);
    expect((await sim.api.get("/v0/sandboxes/idle").expect(200)).body.expiresIn).toBe(10 * 60);
    const updated = await sim.api.put("/v0/sandboxes/idle", { spec: { lifecycle } }).expect(200);
    expect(updated.body.expiresIn).toBe(30 * 60);
  });

  it("goes when the limit is cleared", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "cleared" }, spec: { runtime: { ttl: "1d" } } }).expect(200);
    const res = await sim.api.put("/v0/sandboxes/cleared", { spec: { runtime: { ttl: null } } }).expect(200);
    expect(res.body).not.toHaveProperty("expiresIn");
  });
});
