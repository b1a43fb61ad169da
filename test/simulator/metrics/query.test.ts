import request from "supertest";
import { beforeAll, describe, expect, it } from "vitest";
import { bucketStarts, type Resolution } from "../../../simulator/metrics/buckets.js";
import type { GroupByDimension } from "../../../simulator/metrics/dimensions.js";
import type { MetricsEntry } from "../../../simulator/metrics/query.js";
import { ACCOUNT, metricsApp, randomEvents, wireEvent, WORKSPACES, type WireEvent } from "./harness.js";
import { expected, groupKey, nanos } from "./oracle.js";

const URL = `/v0/accounts/${ACCOUNT}/metrics`;
const { app } = metricsApp();
const history = randomEvents(4000, "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", 40, 42);

type Entry = MetricsEntry;

async function walk(query: Record<string, string>, token = "admin", limit = 7) {
  const pages: Array<{
    data: Entry[];
    meta: { hasMore: boolean; nextCursor: string; total: number };
    summary: { totalCost: number; totalUsage?: number };
    resolution: string;
  }> = [];
  let cursor = "";
  do {
    const res = await request(app)
      .get(URL)
      .set("Authorization", `Bearer ${token}`)
      .query({ ...query, limit: String(limit), ...(cursor ? { cursor } : {}) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    pages.push(res.body);
    cursor = res.body.meta.nextCursor;
    expect(res.body.meta.hasMore).toBe(cursor !== "");
  } while (cursor);
  return pages;
}

beforeAll(async () => {
  for (let i = 0; i < history.length; i += 1500) {
    const res = await request(app)
      .post("/_sim/usage-events")
      .send(history.slice(i, i + 1500));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
});

describe("figures match the events, add up, and page exactly once", () => {
  const windows: Array<[string, string, Resolution]> = [
    ["2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "weekly"], // aligned, rollup only
    ["2026-02-03T13:17:00Z", "2026-04-20T05:00:00Z", "daily"], // partial edge days from raw events
    ["2026-01-15T09:30:00Z", "2026-05-20T00:00:01Z", "monthly"],
    ["2026-03-10T10:30:00Z", "2026-03-15T10:30:00Z", "hourly"],
    ["2026-03-10T10:30:00Z", "2026-03-10T20:00:00Z", "daily"], // inside one day
  ];
  const groupings: GroupByDimension[][] = [
    [],
    ["workspace"],
    ["billing_dimension"],
    ["workspace", "resource_type", "billing_dimension"],
    ["resource_uuid"],
    ["resource_name", "billing_dimension"],
    ["resource_type", "resource_uuid", "billing_dimension"],
  ];

  for (const [startTime, endTime, resolution] of windows) {
    for (const groupBy of groupings) {
      it(`${resolution} ${startTime}..${endTime} groupBy=[${groupBy.join(",")}]`, async () => {
        const pages = await walk({ startTime, endTime, resolution, groupBy: groupBy.join(",") });
        const want = expected(history, { startTime, endTime, resolution, groupBy, workspaces: WORKSPACES });
        const seen = new Map<string, Entry>();
        for (const page of pages) {
          expect(page.resolution).toBe(resolution);
          expect(page.meta.total).toBe(want.groups.size);
          expect(nanos(page.summary.totalCost)).toBe(want.totalNanos);
          expect("totalUsage" in page.summary).toBe(groupBy.includes("billing_dimension"));
          for (const entry of page.data) {
            const key = groupKey(entry);
            expect(seen.has(key), `group ${key} seen twice`).toBe(false);
            seen.set(key, entry);
          }
        }
        // Every group exactly once, with exactly the fields its grouping implies.
        expect([...seen.keys()].sort()).toEqual([...want.groups.keys()].sort());
        let sum = 0;
        for (const [key, entry] of seen) {
          const w = want.groups.get(key)!;
          const { summary, timeseries, ...fields } = entry;
          expect(fields).toEqual(w.fields);
          expect(nanos(summary.cost)).toBe(w.costNanos);
          sum += nanos(summary.cost);
          // One point per bucket covering the window, zero-filled, adding up to the entry.
          expect(timeseries.map((p) => p.timestamp)).toEqual(want.buckets.map((b) => new Date(b).toISOString()));
          expect(timeseries.reduce((s, p) => s + nanos(p.cost), 0)).toBe(nanos(summary.cost));
          timeseries.forEach((p, i) => expect(nanos(p.cost)).toBe(w.buckets.get(want.buckets[i]!) ?? 0));
          if (groupBy.includes("billing_dimension")) {
            expect(summary.usage).toBeCloseTo(w.usage, 3);
            expect(timeseries.every((p) => typeof p.usage === "number")).toBe(true);
          } else {
            expect(summary.usage).toBeUndefined();
            expect(timeseries.every((p) => p.usage === undefined)).toBe(true);
          }
        }
        expect(sum).toBe(want.totalNanos);
      });
    }
  }
});

describe("windows, buckets and entries", () => {
  const { app: small } = metricsApp();
  const ev = (timestamp: string, over: Partial<WireEvent> = {}): WireEvent => wireEvent({ timestamp, ...over });
  beforeAll(async () => {
    const events = [
      ev("2026-03-31T23:59:59.999Z"), // just before the window
      ev("2026-04-01T00:00:00Z"), // at the start: in
      ev("2026-04-08T12:00:00Z"),
      ev("2026-04-10T00:00:00Z"), // at the end: out
      ev("2026-04-05T06:00:00Z", { billingDimension: "sandbox_image_storage_gbs", usage: 86_400 }),
      ev("2026-04-05T06:00:00Z", { resourceName: "box", resourceUuid: "u-box-2" }), // same name, new uuid
      ev("2026-04-06T00:00:00Z", {
        workspace: "ws-b",
        resourceType: "custom_domain",
        resourceName: "a.example.com",
        resourceUuid: "u-dom",
        billingDimension: "custom_domain_active_time_hours",
        usage: 24,
      }),
    ];
    expect((await request(small).post("/_sim/usage-events").send({ events })).status).toBe(200);
  });
  const q = (query: Record<string, string>) =>
    request(small)
      .get(URL)
      .set("Authorization", "Bearer admin")
      .query({ startTime: "2026-04-01T00:00:00Z", endTime: "2026-04-10T00:00:00Z", ...query });

  it("counts the start instant and not the end instant, and zero-fills every other bucket", async () => {
    const res = await q({ resolution: "daily" });
    expect(res.body.data).toHaveLength(1);
    const series = res.body.data[0].timeseries as Array<{ timestamp: string; cost: number }>;
    expect(series.map((p) => p.timestamp)).toEqual(
      bucketStarts(Date.parse("2026-04-01T00:00:00Z"), Date.parse("2026-04-10T00:00:00Z"), "daily").map((b) => new Date(b).toISOString()),
    );
    expect(series.filter((p) => p.cost > 0).map((p) => p.timestamp)).toEqual([
      "2026-04-01T00:00:00.000Z",
      "2026-04-05T00:00:00.000Z",
      "2026-04-06T00:00:00.000Z",
      "2026-04-08T00:00:00.000Z",
    ]);
    // 1 GB-hour of compute at the default $0.03 per GB-hour.
    expect(series[0]!.cost).toBeCloseTo(0.03, 9);
  });

  it("starts weekly buckets on Mondays and monthly ones on the first, before a mid-bucket start", async () => {
    const weekly = await q({ resolution: "weekly" });
    expect(weekly.body.data[0].timeseries.map((p: { timestamp: string }) => p.timestamp)).toEqual(["2026-03-30T00:00:00.000Z", "2026-04-06T00:00:00.000Z"]);
    const monthly = await q({ resolution: "monthly" });
    expect(monthly.body.data[0].timeseries.map((p: { timestamp: string }) => p.timestamp)).toEqual(["2026-04-01T00:00:00.000Z"]);
  });

  it("enriches entries: uuid → workspace, name, type; name → workspace, type; billing dimension → type", async () => {
    const byUuid = await q({ groupBy: "resource_uuid", resourceType: "sandbox" });
    expect(byUuid.body.data.map((e: Entry) => Object.keys(e).sort())).toEqual([
      ["resourceName", "resourceType", "resourceUuid", "summary", "timeseries", "workspace"],
      ["resourceName", "resourceType", "resourceUuid", "summary", "timeseries", "workspace"],
    ]);
    expect(byUuid.body.data[0]).toMatchObject({ workspace: "ws-a", resourceType: "sandbox", resourceName: "box", resourceUuid: "u-box" });
    const byName = await q({ groupBy: "resource_name", resourceType: "sandbox" });
    expect(byName.body.data).toHaveLength(1); // two uuids, one name
    expect(Object.keys(byName.body.data[0]).sort()).toEqual(["resourceName", "resourceType", "summary", "timeseries", "workspace"]);
    const byDim = await q({ groupBy: "billing_dimension" });
    expect(byDim.body.data.map((e: Entry) => [e.billingDimension, e.resourceType, e.summary.usage])).toEqual([
      ["custom_domain_active_time_hours", "custom_domain", 24],
      ["sandbox_compute_runtime_gbs", "sandbox", 3 * 3600],
      ["sandbox_image_storage_gbs", "sandbox", 86_400],
    ]);
    expect(byDim.body.summary.totalUsage).toBe(24 + 3 * 3600 + 86_400);
    expect(byDim.body.data[0].timeseries[5]).toEqual({ timestamp: "2026-04-06T00:00:00.000Z", cost: 0.24, usage: 24 });
  });

  it("filters by resourceType, billingDimension, resourceName and resourceUuid", async () => {
    const total = async (query: Record<string, string>) => (await q(query)).body.summary.totalCost as number;
    expect(await total({ resourceType: "custom_domain" })).toBeCloseTo(0.24, 9);
    expect(await total({ billingDimension: "sandbox_compute_runtime_gbs" })).toBeCloseTo(0.09, 9);
    expect(await total({ resourceUuid: "u-box-2" })).toBeCloseTo(0.03, 9);
    expect(await total({ resourceName: "box", billingDimension: "sandbox_compute_runtime_gbs" })).toBeCloseTo(0.09, 9);
    expect(await total({ resourceType: "job" })).toBe(0);
    expect((await q({ resourceType: "job" })).body).toMatchObject({ data: [], meta: { hasMore: false, nextCursor: "", total: 0 } });
  });
});
