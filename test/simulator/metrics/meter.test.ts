import request from "supertest";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { CursorCodec } from "../../../src/cursor.js";
import { errorMiddleware } from "../../../src/http.js";
import { silentLogger } from "../../../src/logging.js";
import { openDatabase } from "../../../src/sqlite.js";
import { UsageMeter } from "../../../simulator/metrics/meter.js";
import { recordSpan, recordUsage, type ResourceRef } from "../../../simulator/metrics/record.js";
import { createMetricsRouter } from "../../../simulator/metrics/routes.js";
import { UsageStore } from "../../../simulator/metrics/usage-store.js";
import { ACCOUNT, stubAccess } from "./harness.js";
import express from "express";

const box: ResourceRef = { workspace: "ws-a", resourceType: "sandbox", resourceName: "box", resourceUuid: "u-box" };
const domain: ResourceRef = { workspace: "ws-a", resourceType: "custom_domain", resourceName: "a.example.com", resourceUuid: "u-dom" };
const t = (s: string) => Date.parse(s);

function setup(now = "2026-04-01T10:30:00Z") {
  const clock = new FakeClock(now);
  const usage = new UsageStore(openDatabase(":memory:"));
  const meter = new UsageMeter(usage, clock);
  const app = express();
  app.use("/v0/accounts/:accountId/metrics", createMetricsRouter({ usage, cursors: new CursorCodec({ now: () => clock.now() }), access: stubAccess, meter }));
  app.use(errorMiddleware((e) => ({ error: e.code, code: e.status, message: e.message }), silentLogger()));
  const hourly = async () =>
    (
      await request(app)
        .get(`/v0/accounts/${ACCOUNT}/metrics`)
        .set("Authorization", "Bearer admin")
        .query({ startTime: "2026-04-01T00:00:00Z", endTime: "2026-04-02T00:00:00Z", groupBy: "billing_dimension" })
    ).body;
  return { clock, usage, meter, hourly };
}

describe("recordSpan / recordUsage", () => {
  it("splits a span at UTC hour boundaries: GB-seconds for gbs, hours for hours dimensions", async () => {
    const { usage, hourly } = setup();
    expect(recordSpan(usage, box, "sandbox_compute_runtime_gbs", { from: t("2026-04-01T10:30:00Z"), to: t("2026-04-01T12:15:00Z"), gb: 2 })).toBe(3);
    recordSpan(usage, domain, "custom_domain_active_time_hours", { from: t("2026-04-01T10:30:00Z"), to: t("2026-04-01T12:00:00Z") });
    recordUsage(
      usage,
      { ...box, resourceType: "agent", resourceUuid: "u-agent", resourceName: "ag" },
      "agent_async_requests_count",
      7,
      t("2026-04-01T13:05:00Z"),
    );
    const body = await hourly();
    const by = Object.fromEntries(
      body.data.map((e: { billingDimension: string; timeseries: Array<{ usage: number }> }) => [e.billingDimension, e.timeseries.map((p) => p.usage)]),
    );
    expect(by.sandbox_compute_runtime_gbs.slice(10, 13)).toEqual([1800 * 2, 3600 * 2, 900 * 2]);
    expect(by.custom_domain_active_time_hours.slice(10, 12)).toEqual([0.5, 1]);
    expect(by.agent_async_requests_count[13]).toBe(7);
    expect(() => recordSpan(usage, box, "agent_async_requests_count", { from: 0, to: 1 })).toThrow(/not a gbs or hours/);
    expect(recordSpan(usage, box, "sandbox_compute_runtime_gbs", { from: 5, to: 5, gb: 1 })).toBe(0);
  });
});

describe("UsageMeter", () => {
  it("shows a running resource up to now in every answer, and stops counting when stopped", async () => {
    const { clock, meter, hourly } = setup();
    meter.start(box, "sandbox_compute_runtime_gbs", 4);
    clock.advance(30 * 60_000);
    expect((await hourly()).summary.totalUsage).toBe(1800 * 4);
    clock.advance(60 * 60_000);
    meter.start(box, "sandbox_compute_runtime_gbs", 8); // resized: the 4 GB span closes here
    clock.advance(15 * 60_000);
    meter.stop("u-box");
    clock.advance(60 * 60_000);
    const body = await hourly();
    expect(body.summary.totalUsage).toBe(5400 * 4 + 900 * 8);
    expect(body.data[0].timeseries.slice(10, 14).map((p: { usage: number }) => p.usage)).toEqual([1800 * 4, 3600 * 4, 900 * 8, 0]);
    expect(meter.openSpans).toBe(0);
  });

  it("starts and stops at given times, for status moves settled after they fell due", async () => {
    const { clock, meter, hourly } = setup("2026-04-01T12:00:00Z");
    meter.start(box, "sandbox_compute_runtime_gbs", 1, t("2026-04-01T10:00:00Z"));
    meter.stop("u-box", "sandbox_compute_runtime_gbs", t("2026-04-01T11:30:00Z"));
    clock.advance(3_600_000);
    expect((await hourly()).summary.totalUsage).toBe(5400);
    // A late flush only records open spans; nothing is open any more.
    expect(meter.openSpans).toBe(0);
  });

  it("run(): keeps a running span, replaces one not started yet without recording it", async () => {
    const { clock, meter, hourly } = setup("2026-04-01T10:00:00Z");
    meter.run(box, "sandbox_compute_runtime_gbs", 1, t("2026-04-01T10:30:00Z")); // due at 10:30
    meter.run(box, "sandbox_compute_runtime_gbs", 1, t("2026-04-01T11:00:00Z")); // re-planned before it started
    clock.advance(2 * 3_600_000); // 12:00
    meter.run(box, "sandbox_compute_runtime_gbs", 1, t("2026-04-01T12:30:00Z")); // running: a redeploy keeps it
    clock.advance(3_600_000); // 13:00
    meter.run(box, "sandbox_compute_runtime_gbs", 2, t("2026-04-01T13:00:00Z")); // resized from now
    clock.advance(3_600_000); // 14:00
    meter.stopWorkspace("ws-a");
    expect((await hourly()).summary.totalUsage).toBe(2 * 3600 + 2 * 3600);
  });

  it("keeps open spans in the database: a meter on the same file carries on", async () => {
    const clock = new FakeClock("2026-04-01T10:00:00Z");
    const db = openDatabase(":memory:");
    const first = new UsageMeter(new UsageStore(db), clock);
    first.start(box, "sandbox_compute_runtime_gbs", 2);
    clock.advance(1_800_000);
    first.flush();
    const usage = new UsageStore(db);
    const second = new UsageMeter(usage, clock); // a restart
    expect(second.openSpans).toBe(1);
    clock.advance(1_800_000);
    second.stop("u-box");
    expect(usage.db.prepare("SELECT SUM(usage) AS gbs FROM metrics_usage_events").get()).toEqual({ gbs: 7200 });
    second.clear();
    expect(new UsageMeter(usage, clock).openSpans).toBe(0);
  });

  it("runs the beforeFlush settlers with the flush time", () => {
    const { clock, meter } = setup();
    const seen: number[] = [];
    meter.beforeFlush((now) => seen.push(now));
    meter.flush();
    expect(seen).toEqual([clock.now()]);
  });
});
