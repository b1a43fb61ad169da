import request from "supertest";
import { describe, expect, it } from "vitest";
import { ACCOUNT, metricsApp, wireEvent } from "./harness.js";

const URL = `/v0/accounts/${ACCOUNT}/metrics`;
const W = { startTime: "2026-04-01T00:00:00Z", endTime: "2026-04-02T00:00:00Z" };
const ev = (over: Record<string, unknown> = {}) => wireEvent(over);

describe("POST /_sim/usage-events", () => {
  it("ingests a bare array or {events}, and the events show in the metrics", async () => {
    const { app } = metricsApp();
    expect((await request(app).post("/_sim/usage-events").send([ev(), ev()])).body).toEqual({ ingested: 2 });
    expect(
      (
        await request(app)
          .post("/_sim/usage-events")
          .send({ events: [ev()] })
      ).body,
    ).toEqual({ ingested: 1 });
    const res = await request(app).get(URL).set("Authorization", "Bearer admin").query(W);
    expect(res.body.summary.totalCost).toBeCloseTo(0.09, 9);
  });

  it("rejects a bad event with a 400 naming it, and records nothing of that batch", async () => {
    const { app } = metricsApp();
    const cases: Array<[unknown, string]> = [
      [{ nope: [] }, "body: expected a JSON array"],
      [{ events: [], extra: 1 }, 'body: unknown field "extra"'],
      [[ev(), 5], "body[1]: expected an object"],
      [{ events: [ev(), ev({ timestamp: "2026-04-01" })] }, "body.events[1].timestamp"],
      [[ev({ usage: -1 })], "body[0].usage: expected a finite number >= 0"],
      [[ev({ usage: "1" })], "body[0].usage"],
      [[ev({ workspace: "" })], "body[0].workspace"],
      [[ev({ resourceType: "database" })], 'body[0].resourceType: unknown resource type "database"'],
      [[ev({ billingDimension: "gpu" })], 'body[0].billingDimension: unknown billing dimension "gpu"'],
      [[ev({ billingDimension: "volume_storage_gbs" })], "body[0].billingDimension: volume_storage_gbs belongs to resource type volume, not sandbox"],
      [[ev(), ev({ resourceName: "other" })], "body[1].resourceUuid: u-box appears with another workspace, type or name at body[0]"],
      [[ev({ colour: "red" })], 'body[0]: unknown field "colour"'],
    ];
    for (const [body, message] of cases) {
      const res = await request(app)
        .post("/_sim/usage-events")
        .send(body as object);
      expect(res.status, message).toBe(400);
      expect(res.body.message).toContain(message);
    }
    const none = await request(app).get(URL).set("Authorization", "Bearer admin").query(W);
    expect(none.body.summary.totalCost).toBe(0);
    // A uuid once recorded keeps its identity across batches.
    expect((await request(app).post("/_sim/usage-events").send([ev()])).status).toBe(200);
    const clash = await request(app)
      .post("/_sim/usage-events")
      .send([ev({ workspace: "ws-b" })]);
    expect(clash.status).toBe(400);
    expect(clash.body.message).toBe("body[0].resourceUuid: u-box is already recorded for another workspace, type or name");
  });

  it("rejects bodies that are not JSON", async () => {
    const { app } = metricsApp();
    const res = await request(app).post("/_sim/usage-events").set("Content-Type", "application/json").send("[{");
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("bad_request");
  });
});

describe("/_sim/prices", () => {
  it("lists the defaults, overrides a price for usage recorded afterwards, and restores it with null", async () => {
    const { app } = metricsApp();
    const table = (await request(app).get("/_sim/prices")).body.prices;
    expect(Object.keys(table)).toHaveLength(12);
    expect(table.custom_domain_active_time_hours).toEqual({ usdPerUnit: 0.01, defaultUsdPerUnit: 0.01, unit: "hours", overridden: false });

    await request(app).post("/_sim/usage-events").send([ev()]); // 1 GB-hour at the default $0.03
    const put = await request(app).put("/_sim/prices").send({ sandbox_compute_runtime_gbs: 0.001 });
    expect(put.body.prices.sandbox_compute_runtime_gbs).toMatchObject({ usdPerUnit: 0.001, overridden: true });
    await request(app)
      .post("/_sim/usage-events")
      .send([ev({ timestamp: "2026-04-01T11:00:00Z" })]); // 3600 GB-s at $0.001
    const res = await request(app)
      .get(URL)
      .set("Authorization", "Bearer admin")
      .query({ ...W, resolution: "hourly" });
    const points = res.body.data[0].timeseries;
    expect(points[10].cost).toBeCloseTo(0.03, 9);
    expect(points[11].cost).toBeCloseTo(3.6, 9);

    const reset = await request(app).put("/_sim/prices").send({ sandbox_compute_runtime_gbs: null });
    expect(reset.body.prices.sandbox_compute_runtime_gbs).toMatchObject({ usdPerUnit: 0.03 / 3600, overridden: false });
  });

  it("rejects unknown dimensions and negative prices", async () => {
    const { app } = metricsApp();
    const unknown = await request(app).put("/_sim/prices").send({ gpu_seconds: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toBe("body.gpu_seconds: unknown billing dimension");
    const negative = await request(app).put("/_sim/prices").send({ volume_storage_gbs: -1 });
    expect(negative.status).toBe(400);
    expect(negative.body.message).toContain("body.volume_storage_gbs");
  });
});
