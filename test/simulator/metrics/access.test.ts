import request from "supertest";
import { beforeAll, describe, expect, it } from "vitest";
import { ACCOUNT, metricsApp, randomEvents } from "./harness.js";
import { expected, nanos } from "./oracle.js";

const URL = `/v0/accounts/${ACCOUNT}/metrics`;
const { app, clock } = metricsApp();
const history = randomEvents(3000, "2026-01-01T00:00:00Z", "2026-05-01T00:00:00Z", 160, 3);
const W = { startTime: "2026-01-01T00:00:00Z", endTime: "2026-05-01T00:00:00Z" };
const get = (query: Record<string, string>, token = "admin") => request(app).get(URL).set("Authorization", `Bearer ${token}`).query(query);

beforeAll(async () => {
  expect((await request(app).post("/_sim/usage-events").send({ events: history })).status).toBe(200);
});

describe("who may see what", () => {
  it("refuses the workspace filter and grouping by workspace to non-admins with 403 Access denied", async () => {
    for (const query of [
      { ...W, workspace: "ws-a" },
      { ...W, groupBy: "workspace" },
      { ...W, groupBy: "billing_dimension,workspace" },
    ]) {
      const res = await get(query, "member-ws-a");
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: "forbidden", code: 403, message: "Access denied" });
    }
    expect((await get({ ...W, workspace: "ws-a", groupBy: "workspace" })).status).toBe(200);
  });

  it("shows a non-admin only the workspaces they belong to", async () => {
    const res = await get({ ...W, groupBy: "resource_uuid", limit: "100" }, "member-ws-b");
    expect(res.status).toBe(200);
    const want = expected(history, { ...W, resolution: "weekly", groupBy: ["resource_uuid"], workspaces: ["ws-b"] });
    expect(nanos(res.body.summary.totalCost)).toBe(want.totalNanos);
    expect(res.body.meta.total).toBe(want.groups.size);
    expect(new Set(res.body.data.map((e: { workspace: string }) => e.workspace))).toEqual(new Set(["ws-b"]));
    const all = await get(W);
    expect(res.body.summary.totalCost).toBeLessThan(all.body.summary.totalCost);
  });

  it("narrows an admin's view to the workspace filter", async () => {
    const res = await get({ ...W, workspace: "ws-c" });
    expect(nanos(res.body.summary.totalCost)).toBe(expected(history, { ...W, resolution: "weekly", groupBy: [], workspaces: ["ws-c"] }).totalNanos);
    expect((await get({ ...W, workspace: "ws-elsewhere" })).body).toMatchObject({ data: [], summary: { totalCost: 0 }, meta: { total: 0 } });
  });

  it("refuses another account's metrics and a request without credentials", async () => {
    const other = await request(app).get(`/v0/accounts/acc-2/metrics`).set("Authorization", "Bearer admin").query(W);
    expect(other.status).toBe(403);
    expect(other.body.message).toBe("Access denied");
    expect((await request(app).get(URL).query(W)).status).toBe(401);
    expect((await request(app).get(`${URL}/enums/group-by`)).status).toBe(401);
  });
});

describe("pages and cursors", () => {
  const query = { ...W, groupBy: "resource_uuid" };

  it("defaults to 100 entries a page and clamps larger limits to 100", async () => {
    const first = await get(query);
    expect(first.body.data).toHaveLength(100);
    expect(first.body.meta).toMatchObject({ hasMore: true, total: 160 });
    const clamped = await get({ ...query, limit: "1000" });
    expect(clamped.body.data).toHaveLength(100);
    const second = await get({ ...query, cursor: first.body.meta.nextCursor });
    expect(second.body.data).toHaveLength(60);
    expect(second.body.meta).toEqual({ hasMore: false, nextCursor: "", total: 160 });
    expect(second.body.data[0].resourceUuid > first.body.data[99].resourceUuid).toBe(true);
  });

  it("binds the cursor to the query: window, resolution, groupBy, filters, workspace and caller", async () => {
    const cursor = (await get({ ...query, limit: "10" })).body.meta.nextCursor as string;
    expect(cursor).not.toBe("");
    // The same query continues, even with another page size.
    expect((await get({ ...query, limit: "20", cursor })).status).toBe(200);
    const others: Array<[Record<string, string>, string]> = [
      [{ ...query, endTime: "2026-04-30T00:00:00Z" }, "admin"],
      [{ ...query, resolution: "monthly" }, "admin"],
      [{ ...query, groupBy: "resource_uuid,billing_dimension" }, "admin"],
      [{ ...query, resourceType: "sandbox" }, "admin"],
      [{ ...query, billingDimension: "volume_storage_gbs" }, "admin"],
      [{ ...query, workspace: "ws-a" }, "admin"],
      [query, "member-ws-a"],
    ];
    for (const [q, token] of others) {
      const res = await get({ ...q, cursor }, token);
      expect(res.status).toBe(400);
      expect(res.body.message).toBe("query.cursor: cursor belongs to a different query");
    }
  });

  it("keeps a walk exact while usage arrives between pages: no group twice, none skipped after the position", async () => {
    const { app: live } = metricsApp();
    const ev = (uuid: string, usage = 3600) => ({
      timestamp: "2026-02-01T00:00:00Z",
      workspace: "ws-a",
      resourceType: "sandbox",
      resourceName: uuid,
      resourceUuid: uuid,
      billingDimension: "sandbox_compute_runtime_gbs",
      usage,
    });
    await request(live)
      .post("/_sim/usage-events")
      .send(["u-01", "u-02", "u-03", "u-04"].map((u) => ev(u)));
    const page = (cursor?: string) =>
      request(live)
        .get(URL)
        .set("Authorization", "Bearer admin")
        .query({ ...query, limit: "2", ...(cursor ? { cursor } : {}) });
    const first = await page();
    expect(first.body.data.map((e: { resourceUuid: string }) => e.resourceUuid)).toEqual(["u-01", "u-02"]);
    // More usage for a group already seen, and a new group before and after the position.
    await request(live)
      .post("/_sim/usage-events")
      .send([ev("u-01"), ev("u-00"), ev("u-05")]);
    const rest: string[] = [];
    let cursor = first.body.meta.nextCursor as string;
    while (cursor) {
      const res = await page(cursor);
      rest.push(...res.body.data.map((e: { resourceUuid: string }) => e.resourceUuid));
      cursor = res.body.meta.nextCursor;
    }
    expect(rest).toEqual(["u-03", "u-04", "u-05"]);
  });

  it("expires a cursor after 24 hours", async () => {
    const cursor = (await get({ ...query, limit: "10" })).body.meta.nextCursor as string;
    clock.advance(24 * 3_600_000);
    expect((await get({ ...query, cursor })).status).toBe(200);
    clock.advance(1);
    const res = await get({ ...query, cursor });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe("query.cursor: cursor expired");
  });
});

describe("enums", () => {
  it("lists every groupBy value", async () => {
    const res = await request(app).get(`${URL}/enums/group-by`).set("Authorization", "Bearer member-ws-a");
    expect(res.body).toEqual({ values: ["workspace", "resource_type", "resource_name", "resource_uuid", "billing_dimension"] });
  });

  it("lists the resource types with events in the window, among the caller's workspaces", async () => {
    const { app: small } = metricsApp();
    const ev = (timestamp: string, workspace: string, resourceType: string, billingDimension: string) => ({
      timestamp,
      workspace,
      resourceType,
      resourceName: `${resourceType}-1`,
      resourceUuid: `${workspace}-${resourceType}`,
      billingDimension,
      usage: 1,
    });
    await request(small)
      .post("/_sim/usage-events")
      .send([
        ev("2026-02-01T00:00:00Z", "ws-a", "sandbox", "sandbox_compute_runtime_gbs"),
        ev("2026-02-10T12:00:00Z", "ws-a", "volume", "volume_storage_gbs"),
        ev("2026-03-01T00:00:00Z", "ws-a", "job", "job_compute_runtime_gbs"),
        ev("2026-02-02T00:00:00Z", "ws-b", "agent", "agent_async_requests_count"),
      ]);
    const types = async (startTime: string, endTime: string, token = "admin") =>
      (await request(small).get(`${URL}/enums/resource-types`).set("Authorization", `Bearer ${token}`).query({ startTime, endTime })).body;
    expect(await types("2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z")).toEqual({ values: ["sandbox", "agent", "volume"] });
    expect(await types("2026-02-10T12:00:01Z", "2026-03-01T00:00:01Z")).toEqual({ values: ["job"] });
    expect(await types("2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "member-ws-b")).toEqual({ values: ["agent"] });
    expect(await types("2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z")).toEqual({ values: [] });
    const bad = await request(small).get(`${URL}/enums/resource-types`).set("Authorization", "Bearer admin").query({ startTime: "2026-02-01T00:00:00Z" });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain("query.endTime");
  });
});
