import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dueFirings, normalizeScheduleValue, parseCron, cronMatches } from "../../../simulator/schedules/parse.js";
import { startTestSim } from "../../helpers/simulator.js";

describe("schedule value parsing (pure)", () => {
  const now = Date.parse("2026-05-01T10:00:00Z");
  it("resolves sleep durations in s, m, h, d to an at time", () => {
    expect(normalizeScheduleValue("sleep", "1h", now)).toEqual({ type: "at", value: "2026-05-01T11:00:00.000Z" });
    expect(normalizeScheduleValue("sleep", "2d", now).value).toBe("2026-05-03T10:00:00.000Z");
    expect(() => normalizeScheduleValue("sleep", "10", now)).toThrow(/value/);
    expect(() => normalizeScheduleValue("sleep", "5ms", now)).toThrow(/not allowed/);
  });
  it("accepts RFC 3339 at values only", () => {
    expect(normalizeScheduleValue("at", "2026-05-02T08:00:00+02:00", now).value).toBe("2026-05-02T06:00:00.000Z");
    expect(() => normalizeScheduleValue("at", "tomorrow", now)).toThrow(/RFC 3339/);
  });
  it("parses five-field cron with ranges, steps, lists and names", () => {
    const f = parseCron("*/15 8-9 * * mon-fri");
    expect(cronMatches(f, Date.parse("2026-05-01T08:30:00Z"))).toBe(true); // Friday
    expect(cronMatches(f, Date.parse("2026-05-02T08:30:00Z"))).toBe(false); // Saturday
    expect(() => parseCron("* * *")).toThrow(/5 fields/);
    expect(() => parseCron("61 * * * *")).toThrow(/minute/);
  });
  it("lists due firings in a window, newest `cap` only", () => {
    expect(dueFirings("cron", "0 * * * *", now, now + 3 * 3_600_000, 100)).toHaveLength(3);
    expect(dueFirings("cron", "* * * * *", now, now + 3_600_000, 5)).toHaveLength(5);
    expect(dueFirings("at", "2026-05-01T10:30:00.000Z", now, now + 3_600_000, 5)).toEqual([now + 1_800_000]);
  });
});

describe("sandbox schedules over HTTP", () => {
  const sim = startTestSim();
  afterAll(() => sim.close());
  beforeAll(async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "box" } }).expect(200);
  });

  it("stores sleep as at with an RFC 3339 value, defaults maxExecutions to 100, masks env values", async () => {
    const res = await sim.api.post("/v0/sandboxes/box/schedules", { type: "sleep", value: "1h", input: { command: "echo hi", env: { KEY: "v" } } }).expect(200);
    expect(res.body).toMatchObject({
      type: "at",
      value: "2026-05-01T11:00:00.000Z",
      maxExecutions: 100,
      sandbox: "box",
      input: { command: "echo hi", env: { KEY: "***" } },
    });
    const shown = await sim.api.get(`/v0/sandboxes/box/schedules/${res.body.id}?show_secrets=true`).expect(200);
    expect(shown.body.input.env.KEY).toBe("v");
  });

  it("rejects bad values, unknown fields and unknown sandboxes", async () => {
    expect((await sim.api.post("/v0/sandboxes/box/schedules", { type: "cron", value: "* *" }).expect(400)).body.message).toContain("value");
    expect((await sim.api.post("/v0/sandboxes/box/schedules", { type: "at", value: "2026-05-01T12:00:00Z", extra: 1 }).expect(400)).body.message).toContain(
      "extra",
    );
    await sim.api.post("/v0/sandboxes/ghost/schedules", { type: "sleep", value: "1m" }).expect(404);
    await sim.api.post("/v0/sandboxes/box/schedules", { id: "dup", type: "cron", value: "0 * * * *" }).expect(200);
    await sim.api.post("/v0/sandboxes/box/schedules", { id: "dup", type: "cron", value: "0 * * * *" }).expect(409);
  });

  it("records executions as time passes, keeps at most maxExecutions per schedule, removes fired at entries", async () => {
    await sim.api
      .post("/v0/sandboxes/box/schedules", { id: "minutely", type: "cron", value: "* * * * *", maxExecutions: 3, input: { command: "date" } })
      .expect(200);
    sim.clock.advance(2 * 3_600_000);
    const execs = await sim.api.get("/v0/sandboxes/box/schedule-executions?limit=100").expect(200);
    const minutely = execs.body.data.filter((e: { scheduleId: string }) => e.scheduleId === "minutely");
    expect(minutely).toHaveLength(3);
    expect(minutely[0]).toMatchObject({ status: "succeeded", statusCode: 200, sandbox: "box" });
    const list = await sim.api.get("/v0/sandboxes/box/schedules").expect(200);
    // the 1h sleep (now an at entry) fired and was removed; dup and minutely remain
    expect(list.body.data.map((s: { id: string }) => s.id).sort()).toEqual(["dup", "minutely"]);
    const hourly = execs.body.data.filter((e: { scheduleId: string }) => e.scheduleId === "dup");
    expect(hourly).toHaveLength(2);
  });

  it("pages schedule lists 20 by default, 100 at most; filters by type across sandboxes", async () => {
    for (let i = 0; i < 22; i++) await sim.api.post("/v0/sandboxes/box/schedules", { type: "at", value: "2027-01-01T00:00:00Z" }).expect(200);
    const page = await sim.api.get("/v0/schedules").expect(200);
    expect(page.body.data).toHaveLength(20);
    expect(page.body.meta.hasMore).toBe(true);
    const crons = await sim.api.get("/v0/schedules?type=cron&limit=1000").expect(200);
    expect(crons.body.data.map((s: { id: string }) => s.id).sort()).toEqual(["dup", "minutely"]);
    const metrics = await sim.api.get("/v0/schedules/metrics").expect(200);
    expect(metrics.body).toMatchObject({ sandboxes: 1, schedules: 24 });
  });

  it("updates, deletes (returning the entry) and cascades with the sandbox", async () => {
    const updated = await sim.api.put("/v0/sandboxes/box/schedules/dup", { type: "cron", value: "30 8 * * 1-5" }).expect(200);
    expect(updated.body.value).toBe("30 8 * * 1-5");
    expect((await sim.api.delete("/v0/sandboxes/box/schedules/dup").expect(200)).body.id).toBe("dup");
    await sim.api.get("/v0/sandboxes/box/schedules/dup").expect(404);
    await sim.api.delete("/v0/sandboxes/box").expect(200);
    const all = await sim.api.get("/v0/schedules").expect(200);
    expect(all.body.data).toHaveLength(0);
    await request(sim.app).get("/v0/schedule-executions").expect(401);
  });
});
