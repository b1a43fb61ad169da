import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSim, type TestSim } from "../../helpers/simulator.js";
import { randomEvents } from "./harness.js";
import { expected, nanos } from "./oracle.js";

/** The metrics API end to end through the simulator: its auth, accounts, workspaces and test hooks. */
let sim: TestSim;
const ADMIN = "acme-admin-key-0001";
const MEMBER = "acme-member-key-0001";
const OUTSIDER = "other-admin-key-0001";
const W = { startTime: "2026-01-01T00:00:00Z", endTime: "2026-05-01T00:00:00Z" };
// Usage in the harness's workspace names, renamed to the seeded ones.
const RENAME: Record<string, string> = { "ws-a": "acme-one", "ws-b": "acme-two", "ws-c": "acme-three" };
const history = randomEvents(20_000, W.startTime, W.endTime, 60, 9).map((e) => ({ ...e, workspace: RENAME[e.workspace]! }));
const metrics = (key: string, query: Record<string, string>, account = "acme") =>
  request(sim.app).get(`/v0/accounts/${account}/metrics`).set("Authorization", `Bearer ${key}`).query(query);

beforeAll(async () => {
  sim = startTestSim();
  const seed = await request(sim.app)
    .post("/_sim/seed")
    .send({
      accounts: [{ id: "acme" }, { id: "other" }],
      workspaces: [
        { name: "acme-one", accountId: "acme" },
        { name: "acme-two", accountId: "acme" },
        { name: "acme-three", accountId: "acme" },
        { name: "other-one", accountId: "other" },
      ],
      users: [
        { email: "admin@acme.test", accountId: "acme", role: "admin", apiKey: ADMIN },
        { email: "dev@acme.test", accountId: "acme", role: "member", workspaces: ["acme-two"], apiKey: MEMBER },
        { email: "admin@other.test", accountId: "other", role: "admin", apiKey: OUTSIDER },
      ],
    });
  expect(seed.status, JSON.stringify(seed.body)).toBe(200);
  // One request of 20,000 events (≈ 4 MB): larger than the simulator's own /_sim JSON limit.
  const ingest = await request(sim.app).post("/_sim/usage-events").send({ events: history });
  expect(ingest.status, JSON.stringify(ingest.body)).toBe(200);
  expect(ingest.body).toEqual({ ingested: history.length });
});
afterAll(() => sim?.close());

describe("account metrics through the simulator", () => {
  it("gives an account admin every workspace of the account, grouped by workspace", async () => {
    const res = await metrics(ADMIN, { ...W, groupBy: "workspace" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const want = expected(history, { ...W, resolution: "weekly", groupBy: ["workspace"], workspaces: Object.values(RENAME) });
    expect(res.body.data.map((e: { workspace: string }) => e.workspace)).toEqual(["acme-one", "acme-three", "acme-two"]);
    expect(nanos(res.body.summary.totalCost)).toBe(want.totalNanos);
  });

  it("shows a member only their workspace and refuses them the workspace filter and grouping", async () => {
    const res = await metrics(MEMBER, { ...W, groupBy: "resource_uuid" });
    expect(res.status).toBe(200);
    expect(new Set(res.body.data.map((e: { workspace: string }) => e.workspace))).toEqual(new Set(["acme-two"]));
    expect(nanos(res.body.summary.totalCost)).toBe(expected(history, { ...W, resolution: "weekly", groupBy: [], workspaces: ["acme-two"] }).totalNanos);
    for (const query of [
      { ...W, groupBy: "workspace" },
      { ...W, workspace: "acme-two" },
    ]) {
      const denied = await metrics(MEMBER, query);
      expect(denied.status).toBe(403);
      expect(denied.body).toEqual({ error: "forbidden", code: 403, message: "Access denied" });
    }
  });

  it("keeps other accounts out, and needs a credential", async () => {
    expect((await metrics(OUTSIDER, W)).status).toBe(403);
    expect((await metrics(OUTSIDER, W, "other")).body).toMatchObject({ data: [], summary: { totalCost: 0 } });
    expect((await request(sim.app).get("/v0/accounts/acme/metrics").query(W)).status).toBe(401);
  });

  it("serves both enums and renders validation errors as {error, code, message}", async () => {
    const enums = await request(sim.app).get("/v0/accounts/acme/metrics/enums/group-by").set("Authorization", `Bearer ${ADMIN}`);
    expect(enums.body.values).toHaveLength(5);
    const types = await request(sim.app).get("/v0/accounts/acme/metrics/enums/resource-types").set("Authorization", `Bearer ${MEMBER}`).query(W);
    expect(types.body.values.sort()).toEqual([...new Set(history.filter((e) => e.workspace === "acme-two").map((e) => e.resourceType))].sort());
    const bad = await metrics(ADMIN, { ...W, groupBy: "a,b,c,d" });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: "bad_request", code: 400 });
    expect(bad.body.message).toContain("query.groupBy");
  });
});
