import request from "supertest";
import { describe, expect, it } from "vitest";
import { ACCOUNT, metricsApp } from "./harness.js";

const { app } = metricsApp();
const URL = `/v0/accounts/${ACCOUNT}/metrics`;
const W = { startTime: "2026-05-01T00:00:00Z", endTime: "2026-05-08T00:00:00Z" };
const get = (query: Record<string, string | string[]>) => request(app).get(URL).set("Authorization", "Bearer admin").query(query);

async function expect400(query: Record<string, string | string[]>, parameter: string, detail?: RegExp) {
  const res = await get(query);
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body).toMatchObject({ error: "bad_request", code: 400 });
  expect(res.body.message).toContain(`query.${parameter}`);
  if (detail) expect(res.body.message).toMatch(detail);
}

describe("metrics query validation: 400 naming the parameter", () => {
  it("requires startTime and endTime", async () => {
    await expect400({ endTime: W.endTime }, "startTime", /required/);
    await expect400({ startTime: W.startTime }, "endTime", /required/);
  });

  it("requires RFC 3339 date-times with an offset and real calendar dates", async () => {
    for (const bad of [
      "2026-05-01",
      "2026-05-01T00:00:00",
      "yesterday",
      "1714521600",
      "2026-02-30T00:00:00Z",
      "2026-05-01T24:00:00Z",
      "2026-13-01T00:00:00Z",
    ]) {
      await expect400({ ...W, startTime: bad }, "startTime", /RFC 3339/);
    }
    await expect400({ ...W, endTime: "2026-05-08T00:00:00+25:00" }, "endTime", /RFC 3339/);
    await expect400({ ...W, startTime: [W.startTime, W.startTime] }, "startTime", /once/);
    // Offsets and fractions are accepted and normalized to UTC.
    const ok = await get({ startTime: "2026-05-01T02:00:00.5+02:00", endTime: "2026-05-02t00:00:00z" });
    expect(ok.status).toBe(200);
    expect(ok.body.startTime).toBe("2026-05-01T00:00:00.500Z");
    expect(ok.body.endTime).toBe("2026-05-02T00:00:00.000Z");
  });

  it("requires startTime before endTime, at most 100 years apart", async () => {
    await expect400({ startTime: W.endTime, endTime: W.startTime }, "endTime", /after startTime/);
    await expect400({ startTime: W.startTime, endTime: W.startTime }, "endTime", /after startTime/);
    await expect400({ startTime: "1990-01-01T00:00:00Z", endTime: "2091-01-01T00:00:00Z" }, "endTime", /at most 100 years/);
  });

  it("accepts at most 3 distinct known groupBy dimensions, in any order", async () => {
    await expect400({ ...W, groupBy: "workspace,resource_type,billing_dimension,resource_uuid" }, "groupBy", /at most 3/);
    await expect400({ ...W, groupBy: "workspace,region" }, "groupBy", /unknown dimension "region"/);
    await expect400({ ...W, groupBy: "workspace,workspace" }, "groupBy", /duplicate dimension "workspace"/);
    await expect400({ ...W, groupBy: "workspace," }, "groupBy", /unknown dimension ""/);
    const res = await get({ ...W, groupBy: "billing_dimension, workspace" });
    expect(res.status).toBe(200);
  });

  it("takes resourceType and billingDimension from their enums", async () => {
    await expect400({ ...W, resourceType: "database" }, "resourceType", /one of sandbox, agent/);
    await expect400({ ...W, billingDimension: "gpu_seconds" }, "billingDimension");
    expect((await get({ ...W, resourceType: "mcp_server" })).status).toBe(200);
  });

  it("accepts hourly, daily, weekly, monthly only, each within its cap", async () => {
    await expect400({ ...W, resolution: "minutely" }, "resolution", /one of hourly, daily, weekly, monthly/);
    const at = (days: number) => new Date(Date.parse(W.startTime) + days * 86_400_000).toISOString();
    // Exactly at the cap is allowed; a millisecond more is not.
    expect((await get({ startTime: W.startTime, endTime: at(7), resolution: "hourly" })).status).toBe(200);
    await expect400(
      { startTime: W.startTime, endTime: new Date(Date.parse(at(7)) + 1).toISOString(), resolution: "hourly" },
      "resolution",
      /hourly allows a window of at most 7 days/,
    );
    expect((await get({ startTime: W.startTime, endTime: at(90), resolution: "daily" })).status).toBe(200);
    await expect400({ startTime: W.startTime, endTime: at(91), resolution: "daily" }, "resolution", /at most 90 days/);
    expect((await get({ startTime: W.startTime, endTime: at(365), resolution: "weekly" })).status).toBe(200);
    await expect400({ startTime: W.startTime, endTime: at(366), resolution: "weekly" }, "resolution", /at most 365 days/);
    expect((await get({ startTime: W.startTime, endTime: at(3650), resolution: "monthly" })).status).toBe(200);
  });

  it("chooses the resolution from the window when omitted", async () => {
    const at = (ms: number) => new Date(Date.parse(W.startTime) + ms).toISOString();
    const day = 86_400_000;
    const cases: Array<[number, string]> = [
      [7 * day - 1, "hourly"],
      [7 * day, "daily"],
      [90 * day - 1, "daily"],
      [90 * day, "weekly"],
      [365 * day - 1, "weekly"],
      [365 * day, "monthly"],
    ];
    for (const [len, resolution] of cases) {
      const res = await get({ startTime: W.startTime, endTime: at(len) });
      expect([len, res.body.resolution]).toEqual([len, resolution]);
    }
  });

  it("rejects a limit that is not a positive integer and clamps large ones silently", async () => {
    for (const bad of ["0", "-1", "ten", "1.5"]) await expect400({ ...W, limit: bad }, "limit", /positive integer/);
    expect((await get({ ...W, limit: "5000" })).status).toBe(200);
  });

  it("rejects a cursor that is not one of ours", async () => {
    await expect400({ ...W, cursor: "abc" }, "cursor", /invalid cursor/);
  });
});
