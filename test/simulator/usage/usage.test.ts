import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { api, startTestSim, ADMIN_KEY, type TestSim } from "../../helpers/simulator.js";

/**
 * Usage recorded by the simulator's own resources, read back through the
 * account metrics API (the default workspace belongs to account "local").
 * Time moves only through the test-hook clock.
 */
const HOUR = 3_600_000;
const COMPUTE_USD_PER_GBS = 0.03 / 3600;
let sim: TestSim | undefined;
afterEach(() => {
  sim?.close();
  sim = undefined;
});

const advance = (s: TestSim, ms: number) => request(s.app).post("/_sim/clock").send({ advanceMs: ms }).expect(200);

/** Usage and cost per billing dimension (and resource name) over the day around the test clock. */
async function usageBy(s: TestSim): Promise<Record<string, { usage: number; cost: number }>> {
  const res = await request(s.app)
    .get("/v0/accounts/local/metrics")
    .set("Authorization", `Bearer ${ADMIN_KEY}`)
    .query({ startTime: "2026-05-01T00:00:00Z", endTime: "2026-05-03T00:00:00Z", groupBy: "billing_dimension,resource_name" });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const out: Record<string, { usage: number; cost: number }> = {};
  for (const e of res.body.data as { billingDimension: string; resourceName: string; summary: { cost: number; usage: number } }[]) {
    out[`${e.billingDimension}/${e.resourceName}`] = { usage: e.summary.usage, cost: e.summary.cost };
  }
  return out;
}

describe("usage recorded as resources live", () => {
  it("bills a 2048 MB sandbox 7200 GB-s for an hour, and nothing once deleted", async () => {
    sim = startTestSim();
    await sim.api.post("/v0/sandboxes", { metadata: { name: "box" }, spec: { runtime: { memory: 2048 } } }).expect(200);
    await advance(sim, HOUR);
    let usage = await usageBy(sim);
    expect(usage["sandbox_compute_runtime_gbs/box"]!.usage).toBeCloseTo(7200, 6);
    expect(usage["sandbox_compute_runtime_gbs/box"]!.cost).toBeCloseTo(7200 * COMPUTE_USD_PER_GBS, 2);
    await sim.api.delete("/v0/sandboxes/box").expect(200);
    await advance(sim, 5 * HOUR);
    usage = await usageBy(sim);
    expect(usage["sandbox_compute_runtime_gbs/box"]!.usage).toBeCloseTo(7200, 6);
    expect(sim.deps.meter.openSpans).toBe(0);
  });

  it("bills an agent from its planned DEPLOYED time even if nobody reads it, until it is deactivated", async () => {
    sim = startTestSim();
    await sim.api.post("/v0/agents", { metadata: { name: "helper" }, spec: { runtime: { memory: 1024 } } }).expect(200);
    await advance(sim, HOUR);
    // UPLOADING → BUILDING → DEPLOYING → DEPLOYED takes 1.5 s: 3598.5 s × 1 GB.
    expect((await usageBy(sim))["agent_compute_runtime_gbs/helper"]!.usage).toBeCloseTo(3598.5, 6);
    await sim.api.put("/v0/agents/helper", { spec: { enabled: false, runtime: { memory: 1024 } } }).expect(200);
    await advance(sim, HOUR);
    expect((await usageBy(sim))["agent_compute_runtime_gbs/helper"]!.usage).toBeCloseTo(3598.5, 6);
  });

  it("keeps a redeployed agent running and bills a deleted one up to its delete", async () => {
    sim = startTestSim();
    await request(sim.app).post("/_sim/transitions").send({ mode: "immediate" }).expect(200);
    await sim.api.post("/v0/agents", { metadata: { name: "steady" }, spec: { runtime: { memory: 2048 } } }).expect(200);
    await advance(sim, HOUR / 2);
    await request(sim.app).post("/_sim/transitions").send({ mode: "timed" }).expect(200);
    await sim.api.put("/v0/agents/steady", { spec: { runtime: { memory: 2048 } } }).expect(200); // DEPLOYING → DEPLOYED
    await advance(sim, HOUR / 2);
    await sim.api.delete("/v0/agents/steady").expect(200);
    await advance(sim, HOUR);
    expect((await usageBy(sim))["agent_compute_runtime_gbs/steady"]!.usage).toBeCloseTo(7200, 6);
  });

  it("bills MCP servers but not other functions", async () => {
    sim = startTestSim();
    await request(sim.app).post("/_sim/transitions").send({ mode: "immediate" }).expect(200);
    await sim.api.post("/v0/functions", { metadata: { name: "tools" }, spec: { type: "mcp", runtime: { memory: 512 } } }).expect(200);
    await sim.api.post("/v0/functions", { metadata: { name: "plain" }, spec: { runtime: { memory: 512 } } }).expect(200);
    await advance(sim, HOUR);
    const usage = await usageBy(sim);
    expect(usage["mcp_server_compute_runtime_gbs/tools"]!.usage).toBeCloseTo(1800, 6);
    expect(Object.keys(usage).filter((k) => k.endsWith("/plain"))).toEqual([]);
  });

  it("bills volume storage by size while the volume exists", async () => {
    sim = startTestSim();
    await sim.api.post("/v0/volumes", { metadata: { name: "data" }, spec: { size: 2048 } }).expect(200);
    await advance(sim, HOUR);
    await sim.api.delete("/v0/volumes/data").expect(200);
    await advance(sim, HOUR);
    const usage = await usageBy(sim);
    expect(usage["volume_storage_gbs/data"]!.usage).toBeCloseTo(7200, 6);
    expect(usage["volume_storage_gbs/data"]!.cost).toBeCloseTo(7200 * (0.15 / (30 * 86_400)), 6);
  });

  it("bills a custom domain's active hours from its verification", async () => {
    sim = startTestSim();
    const created = await sim.api.post("/v0/customdomains", { metadata: { name: "app.example.com" } }).expect(200);
    await advance(sim, HOUR); // not verified yet: not billed
    const [record, value] = Object.entries(created.body.spec.txtRecords as Record<string, string>)[0]!;
    await request(sim.app)
      .put("/_sim/dns/app.example.com")
      .send({ txt: { [record]: value } })
      .expect(200);
    await sim.api.post("/v0/customdomains/app.example.com/verify").expect(200);
    await advance(sim, 2 * HOUR);
    await sim.api.delete("/v0/customdomains/app.example.com").expect(200);
    await advance(sim, HOUR);
    expect((await usageBy(sim))["custom_domain_active_time_hours/app.example.com"]!.usage).toBeCloseTo(2, 9);
  });

  it("records each ended job execution's tasks × memory, even when nobody reads the execution", async () => {
    sim = startTestSim();
    await request(sim.app).post("/_sim/transitions").send({ mode: "immediate" }).expect(200);
    await sim.api.post("/v0/jobs", { metadata: { name: "batch" }, spec: { runtime: { memory: 2048 } } }).expect(200);
    await sim.api.post("/v0/jobs/batch/executions", { tasks: [{ duration: "10s" }, { duration: "20s" }] }).expect(200);
    await sim.api.post("/v0/jobs/batch/executions", { memory: 1024, tasks: [{ duration: "30s" }] }).expect(200);
    expect(await usageBy(sim)).toEqual({}); // still running: nothing yet
    await advance(sim, 60_000);
    const usage = await usageBy(sim);
    // (10 s + 20 s) × 2 GB + 30 s × 1 GB, both executions side by side on the same job.
    expect(usage["job_compute_runtime_gbs/batch"]!.usage).toBeCloseTo(90, 6);
    // Reading the executions afterwards records nothing twice.
    const list = await sim.api.get("/v0/jobs/batch/executions").expect(200);
    expect(JSON.stringify(list.body)).toContain("succeeded");
    expect((await usageBy(sim))["job_compute_runtime_gbs/batch"]!.usage).toBeCloseTo(90, 6);
  });

  it("bills pushed image layers while the image exists", async () => {
    sim = startTestSim();
    await sim.api.post("/v0/images", { name: "worker", resourceType: "agents", image: "worker:v1" }).expect(200);
    await advance(sim, HOUR);
    const usage = await usageBy(sim);
    // One base layer (50 MiB) + one tag layer (5 MiB), an hour.
    expect(usage["agent_image_storage_gbs/worker"]!.usage).toBeCloseTo((55 / 1024) * 3600, 6);
  });

  it("bills a sandbox snapshot (the sandbox's memory) until it is deleted", async () => {
    sim = startTestSim();
    await sim.api.post("/v0/sandboxes", { metadata: { name: "src" }, spec: { runtime: { memory: 1024 } } }).expect(200);
    await sim.api.post("/v0/snapshots", { name: "snap-a", source: { name: "src" } }).expect(200);
    await advance(sim, HOUR);
    await sim.api.delete("/v0/snapshots/snap-a").expect(204);
    await advance(sim, HOUR);
    expect((await usageBy(sim))["sandbox_snapshot_storage_gbs/snap-a"]!.usage).toBeCloseTo(3600, 6);
  });

  it("ends the usage of a deleted workspace's resources", async () => {
    sim = startTestSim();
    await sim.api.post("/v0/workspaces", { name: "team-b" }).expect(200);
    await api(sim.app, ADMIN_KEY, "team-b")
      .post("/v0/volumes", { metadata: { name: "scratch" }, spec: { size: 1024 } })
      .expect(200);
    await advance(sim, HOUR);
    await sim.api.delete("/v0/workspaces/team-b").expect(200);
    expect(sim.deps.meter.openSpans).toBe(0);
    await advance(sim, HOUR);
    await usageBy(sim); // flushes
    // A deleted workspace no longer shows in its account's metrics: read the recorded events themselves.
    const sum = sim.deps.db.prepare("SELECT SUM(usage) AS gbs FROM metrics_usage_events").get() as { gbs: number };
    expect(sum.gbs).toBeCloseTo(3600, 6);
  });

  it("reset clears recorded usage, open spans and price overrides", async () => {
    sim = startTestSim();
    await request(sim.app).put("/_sim/prices").send({ volume_storage_gbs: 1 }).expect(200);
    await sim.api.post("/v0/volumes", { metadata: { name: "data" }, spec: { size: 1024 } }).expect(200);
    await advance(sim, HOUR);
    expect(await usageBy(sim)).toEqual({ "volume_storage_gbs/data": { usage: 3600, cost: 3600 } });
    await request(sim.app).post("/_sim/reset").expect(200);
    expect(sim.deps.meter.openSpans).toBe(0);
    await advance(sim, HOUR);
    expect(await usageBy(sim)).toEqual({});
    const prices = await request(sim.app).get("/_sim/prices").expect(200);
    expect(prices.body.prices.volume_storage_gbs.overridden).toBe(false);
  });
});

describe("usage across a restart on the same --data file", () => {
  it("carries on metering the resources still live", async () => {
    const dir = mkdtempSync(join(tmpdir(), "usage-restart-"));
    try {
      const data = join(dir, "sim.db");
      const first = startTestSim({ data });
      await first.api.post("/v0/volumes", { metadata: { name: "kept" }, spec: { size: 1024 } }).expect(200);
      await first.api.post("/v0/volumes", { metadata: { name: "gone" }, spec: { size: 1024 } }).expect(200);
      await advance(first, HOUR);
      await first.api.delete("/v0/volumes/gone").expect(200);
      first.close();
      // The second run's clock starts where the first one started: one hour later is 2 h after the create.
      sim = startTestSim({ data });
      await advance(sim, 2 * HOUR);
      const usage = await usageBy(sim);
      expect(usage["volume_storage_gbs/kept"]!.usage).toBeCloseTo(7200, 6);
      expect(usage["volume_storage_gbs/gone"]!.usage).toBeCloseTo(3600, 6);
    } finally {
      sim?.close();
      sim = undefined;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
