import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { openSimulator } from "../../simulator/root.js";
import { createSimulatorApp } from "../../simulator/app.js";
import { ADMIN_KEY, api, startTestSim } from "../helpers/simulator.js";

const sim = startTestSim();
afterAll(() => sim.close());

describe("test hooks", () => {
  it("are absent without --test-hooks", async () => {
    const runtime = openSimulator({ apiKey: ADMIN_KEY });
    try {
      await request(createSimulatorApp(runtime.deps)).post("/_sim/reset").expect(404);
      await request(createSimulatorApp(runtime.deps)).get("/v0/sandboxes").set("Authorization", `Bearer ${ADMIN_KEY}`).set("Prefer", "code=503").expect(200);
    } finally {
      runtime.close();
    }
  });

  it("freezes, advances and sets the clock", async () => {
    const frozen = await request(sim.app).post("/_sim/clock").send({ freeze: true }).expect(200);
    expect(frozen.body.frozen).toBe(true);
    const advanced = await request(sim.app).post("/_sim/clock").send({ advanceMs: 60_000 }).expect(200);
    expect(Date.parse(advanced.body.now) - Date.parse(frozen.body.now)).toBe(60_000);
    const set = await request(sim.app).post("/_sim/clock").send({ set: "2030-01-01T00:00:00Z" }).expect(200);
    expect(set.body.now).toBe("2030-01-01T00:00:00.000Z");
    await request(sim.app).post("/_sim/clock").send({ advanceMs: -1 }).expect(400);
    await request(sim.app).post("/_sim/clock").send({ freeze: false }).expect(200);
  });

  it("injects faults with Prefer: code=503 and with counted rules", async () => {
    const res = await sim.api.get("/v0/sandboxes").set("Prefer", "code=503").expect(503);
    expect(res.body).toMatchObject({ error: "service_unavailable", code: 503 });
    await request(sim.app)
      .put("/_sim/faults")
      .send({ rules: [{ method: "POST", path: "/v0/sandboxes", status: 500, times: 1 }] })
      .expect(200);
    await sim.api.post("/v0/sandboxes", { metadata: { name: "f1" } }).expect(500);
    await sim.api.post("/v0/sandboxes", { metadata: { name: "f1" } }).expect(200);
  });

  it("drives status transitions: manual mode with steps, immediate mode", async () => {
    await request(sim.app).post("/_sim/transitions").send({ mode: "manual" }).expect(200);
    await sim.api.post("/v0/sandboxes/f1/archive").expect(200);
    sim.clock.advance(10_000);
    expect((await sim.api.get("/v0/sandboxes/f1")).body.status).toBe("ARCHIVING");
    const step = await request(sim.app).post("/_sim/transitions/step").send({ kind: "sandbox", name: "f1" }).expect(200);
    expect(step.body).toMatchObject({ moved: true, status: "ARCHIVED" });
    await request(sim.app).post("/_sim/transitions/step").send({ kind: "sandbox", name: "f1", status: "FAILED" }).expect(200);
    expect((await sim.api.get("/v0/sandboxes/f1")).body.status).toBe("FAILED");
    await request(sim.app).post("/_sim/transitions").send({ mode: "immediate" }).expect(200);
    await sim.api.post("/v0/sandboxes", { metadata: { name: "f2" } }).expect(200);
    await sim.api.post("/v0/sandboxes/f2/archive").expect(200);
    expect((await sim.api.get("/v0/sandboxes/f2")).body.status).toBe("ARCHIVED");
    await request(sim.app).post("/_sim/transitions").send({ mode: "sometimes" }).expect(400);
  });

  it("seeds users whose keys work, and resets to the start state", async () => {
    await request(sim.app)
      .post("/_sim/seed")
      .send({
        accounts: [{ id: "acme", name: "Acme" }],
        workspaces: [{ name: "acme-prod", accountId: "acme" }],
        users: [{ email: "ops@acme.test", accountId: "acme", role: "admin", workspaces: ["acme-prod"], apiKey: "acme-admin-key" }],
      })
      .expect(200);
    const accounts = await api(sim.app, "acme-admin-key", "acme-prod").get("/v0/accounts").expect(200);
    expect(accounts.body[0]).toMatchObject({ id: "acme", name: "Acme", role: "admin" });
    await request(sim.app)
      .post("/_sim/seed")
      .send({ users: [{ email: "x@y.test", accountId: "missing" }] })
      .expect(400);
    await request(sim.app).post("/_sim/reset").expect(200);
    await api(sim.app, "acme-admin-key", "acme-prod").get("/v0/sandboxes").expect(401);
    expect((await sim.api.get("/v0/sandboxes")).body.data).toHaveLength(0);
  });
});
