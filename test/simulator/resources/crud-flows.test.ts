import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { api, startTestSim, ADMIN_KEY } from "../../helpers/simulator.js";

const sim = startTestSim();
afterAll(() => sim.close());

describe("deployed resources", () => {
  it("move UPLOADING → BUILDING → DEPLOYING → DEPLOYED on the clock, one event per move", async () => {
    const created = await sim.api.post("/v0/agents", { metadata: { name: "helper" }, spec: { runtime: { image: "helper:latest", memory: 2048 } } }).expect(200);
    expect(created.body.status).toBe("UPLOADING");
    expect(created.body.metadata.url).toBe("http://127.0.0.1:8081/default/agents/helper");
    sim.clock.advance(600);
    expect((await sim.api.get("/v0/agents/helper")).body.status).toBe("BUILDING");
    sim.clock.advance(1000);
    const done = await sim.api.get("/v0/agents/helper").expect(200);
    expect(done.body.status).toBe("DEPLOYED");
    expect(done.body.events.map((e: { status: string }) => e.status)).toEqual(["UPLOADING", "BUILDING", "DEPLOYING", "DEPLOYED"]);
    const revisions = await sim.api.get("/v0/agents/helper/revisions").expect(200);
    expect(revisions.body[0]).toMatchObject({ id: "rev-1", active: true, trafficPercent: 100 });
  });

  it("deactivate through spec.enabled=false, 409 on a duplicate, 404 on a missing one", async () => {
    const updated = await sim.api.put("/v0/agents/helper", { metadata: { name: "helper" }, spec: { enabled: false } }).expect(200);
    expect(updated.body.status).toBe("DEACTIVATING");
    sim.clock.advance(1000);
    expect((await sim.api.get("/v0/agents/helper")).body.status).toBe("DEACTIVATED");
    const dup = await sim.api.post("/v0/agents", { metadata: { name: "helper" } }).expect(409);
    expect(dup.body).toMatchObject({ error: "conflict", code: 409 });
    await sim.api.get("/v0/models/none").expect(404);
  });

  it("lists models and agents with ?workspace= too", async () => {
    await sim.api.post("/v0/models", { metadata: { name: "gpt" }, spec: { runtime: { type: "openai", model: "gpt-4o" } } }).expect(200);
    const res = await request(sim.app).get("/v0/models?workspace=default").set("Authorization", `Bearer ${ADMIN_KEY}`).expect(200);
    expect(res.body.map((m: { metadata: { name: string } }) => m.metadata.name)).toEqual(["gpt"]);
  });
});

describe("flow F1: integration connection then MCP function", () => {
  it("stores the OAuth secrets masked, and an MCP server that references the connection", async () => {
    const conn = await request(sim.app)
      .post("/v0/integrations/connections")
      .set("Authorization", `Bearer ${ADMIN_KEY}`)
      .set("X-Service-Workspace", "default")
      .send({
        metadata: { name: "gmail-alice", displayName: "Alice's mail" },
        spec: { integration: "gmail", secret: { CLIENT_ID: "id", CLIENT_SECRET: "secret", REFRESH_TOKEN: "refresh" } },
      })
      .expect(200);
    expect(conn.body.spec.secret).toEqual({ CLIENT_ID: "***", CLIENT_SECRET: "***", REFRESH_TOKEN: "***" });
    const shown = await sim.api.get("/v0/integrations/connections/gmail-alice?show_secrets=true").expect(200);
    expect(shown.body.spec.secret.REFRESH_TOKEN).toBe("refresh");
    const fn = await sim.api
      .post("/v0/functions", {
        metadata: { name: "mail-mcp", displayName: "Mail" },
        spec: { type: "mcp", integrationConnections: ["gmail-alice"], runtime: { type: "mcp" } },
      })
      .expect(200);
    expect(fn.body.spec).toMatchObject({ type: "mcp", integrationConnections: ["gmail-alice"], runtime: { type: "mcp" } });
    const missing = await sim.api.post("/v0/functions", { metadata: { name: "bad-mcp" }, spec: { type: "mcp", integrationConnections: ["nope"] } }).expect(400);
    expect(missing.body.message).toContain("spec.integrationConnections[0]");
    await sim.api.delete("/v0/integrations/connections/gmail-alice").expect(409);
  });

  it("masks function configurations and envs marked secret", async () => {
    await sim.api
      .post("/v0/functions", {
        metadata: { name: "cfg" },
        spec: {
          configurations: { TOKEN: { secret: true, value: "t" }, MODE: { secret: false, value: "m" } },
          runtime: { envs: [{ name: "K", value: "v", secret: true }] },
        },
      })
      .expect(200);
    const got = await sim.api.get("/v0/functions/cfg").expect(200);
    expect(got.body.spec.configurations).toEqual({ TOKEN: { secret: true, value: "***" }, MODE: { secret: false, value: "m" } });
    expect(got.body.spec.runtime.envs[0].value).toBe("***");
    expect((await sim.api.get("/v0/functions/cfg?show_secrets=true")).body.spec.configurations.TOKEN.value).toBe("t");
  });
});

describe("jobs and executions", () => {
  it("runs queued → pending → running → succeeded with tasks and stats; env overrides masked", async () => {
    await sim.api.post("/v0/jobs", { metadata: { name: "etl" }, spec: { runtime: { image: "etl:1", memory: 1024, maxConcurrentTasks: 1 } } }).expect(200);
    const out = await sim.api.post("/v0/jobs/etl/executions", { env: { SECRET: "x" }, tasks: [{ n: 1 }, { n: 2 }] }).expect(200);
    expect(out.body).toMatchObject({ jobId: "etl", workspaceId: "default" });
    const path = `/v0/jobs/etl/executions/${out.body.executionId}`;
    expect((await sim.api.get(path)).body.status).toBe("queued");
    sim.clock.advance(300);
    expect((await sim.api.get(path)).body.status).toBe("pending");
    sim.clock.advance(300);
    const running = await sim.api.get(path).expect(200);
    expect(running.body.status).toBe("running");
    expect(running.body.stats).toMatchObject({ total: 2, running: 1 });
    expect(running.body.spec.envOverride).toEqual({ SECRET: "***" });
    sim.clock.advance(2000);
    const done = await sim.api.get(path).expect(200);
    expect(done.body.status).toBe("succeeded");
    expect(done.body.stats).toMatchObject({ total: 2, success: 2, running: 0 });
    expect(done.body.tasks.map((t: { status: string }) => t.status)).toEqual(["succeeded", "succeeded"]);
    const list = await sim.api.get("/v0/jobs/etl/executions").expect(200);
    expect(list.body.data).toHaveLength(1);
  });

  it("cancels a running execution: cancelling until the task in flight ends, no new task starts", async () => {
    const out = await sim.api.post("/v0/jobs/etl/executions", { tasks: [{ durationMs: 3000 }, {}] }).expect(200);
    const path = `/v0/jobs/etl/executions/${out.body.executionId}`;
    sim.clock.advance(1000);
    const cancelling = await sim.api.delete(path).expect(200);
    expect(cancelling.body.status).toBe("cancelling");
    sim.clock.advance(5000);
    const cancelled = await sim.api.get(path).expect(200);
    expect(cancelled.body.status).toBe("cancelled");
    expect(cancelled.body.tasks.map((t: { status: string }) => t.status)).toEqual(["succeeded", "cancelled"]);
    expect(cancelled.body.stats).toMatchObject({ success: 1, cancelled: 1 });
  });

  it("reports failed and timeout outcomes, and 404 for unknown executions", async () => {
    await sim.api.post("/v0/jobs", { metadata: { name: "short" }, spec: { runtime: { timeout: 2 } } }).expect(200);
    const fail = await sim.api.post("/v0/jobs/etl/executions", { tasks: [{ fail: true }] }).expect(200);
    const slow = await sim.api.post("/v0/jobs/short/executions", { tasks: [{ duration: "1m" }] }).expect(200);
    sim.clock.advance(5000);
    expect((await sim.api.get(`/v0/jobs/etl/executions/${fail.body.executionId}`)).body.status).toBe("failed");
    expect((await sim.api.get(`/v0/jobs/short/executions/${slow.body.executionId}`)).body.status).toBe("timeout");
    await sim.api.get("/v0/jobs/etl/executions/nope").expect(404);
    await sim.api.post("/v0/jobs/etl/executions", { tasks: [{ duration: "soon" }] }).expect(400);
  });
});

describe("custom domains", () => {
  it("verify re-checks the TXT records against the simulated DNS", async () => {
    const created = await sim.api.post("/v0/customdomains", { metadata: { name: "preview.example.com" }, spec: { domainType: "previews" } }).expect(200);
    expect(created.body.spec.status).toBe("pending");
    const [record, value] = Object.entries(created.body.spec.txtRecords as Record<string, string>)[0]!;
    const failed = await sim.api.post("/v0/customdomains/preview.example.com/verify").expect(200);
    expect(failed.body.spec).toMatchObject({ status: "failed" });
    expect(failed.body.spec.verificationError).toContain(record);
    expect(typeof failed.body.spec.lastVerifiedAt).toBe("string");
    await request(sim.app)
      .put("/_sim/dns/preview.example.com")
      .send({ txt: { [record]: value } })
      .expect(200);
    const ok = await sim.api.post("/v0/customdomains/preview.example.com/verify").expect(200);
    expect(ok.body.spec.status).toBe("verified");
    expect(ok.body.spec.verificationError).toBeUndefined();
    await sim.api.post("/v0/customdomains", { metadata: { name: "Not A Domain" } }).expect(400);
  });
});

describe("volumes, policies, VPCs", () => {
  it("refuses to delete an attached volume (409) and to shrink one", async () => {
    await sim.api.post("/v0/volumes", { metadata: { name: "data" }, spec: { size: 2048 } }).expect(200);
    await sim.api.put("/v0/volumes/data", { spec: { size: 1024 } }).expect(400);
    await sim.api.post("/v0/sandboxes", { metadata: { name: "vol-user" }, spec: { volumes: [{ name: "data", mountPath: "/data" }] } }).expect(200);
    const conflict = await sim.api.delete("/v0/volumes/data").expect(409);
    expect(conflict.body.message).toContain("sandbox:vol-user");
    await sim.api
      .post("/v0/volumes", { metadata: { name: "data" } })
      .expect(409)
      .expect((r) => expect(r.body.code).toBe("VOLUME_ALREADY_EXISTS"));
  });

  it("creates policies and reports their usage", async () => {
    await sim.api
      .post("/v0/policies", {
        metadata: { name: "eu-only" },
        spec: { type: "location", locations: [{ name: "eu", type: "continent" }], resourceTypes: ["sandbox"] },
      })
      .expect(200);
    await sim.api.post("/v0/agents", { metadata: { name: "eu-agent" }, spec: { policies: ["eu-only"] } }).expect(200);
    const usage = await sim.api.get("/v0/policies/eu-only/usages").expect(200);
    expect(usage.body.agents).toEqual([{ name: "eu-agent", type: "agent" }]);
    await sim.api.post("/v0/policies", { metadata: { name: "bad" }, spec: { type: "galaxy" } }).expect(400);
  });

  it("nests egress gateways and IPs under VPCs", async () => {
    await sim.api.post("/v0/vpcs", { metadata: { name: "main", externalId: "ext-1" }, spec: {} }).expect(200);
    const gw = await sim.api.post("/v0/vpcs/main/egressgateways", { metadata: { name: "gw1" }, spec: { region: "us-pdx-1" } }).expect(200);
    expect(gw.body.metadata.vpcName).toBe("main");
    await sim.api.post("/v0/vpcs/main/egressgateways", { metadata: { name: "gw2" }, spec: {} }).expect(400);
    const ip = await sim.api.post("/v0/vpcs/main/egressgateways/gw1/ips", { metadata: { name: "ip1" }, spec: { ipFamily: "IPv4" } }).expect(200);
    expect(ip.body.spec.publicIp).toMatch(/^203\.0\.113\./);
    await sim.api.post("/v0/vpcs/none/egressgateways", { metadata: { name: "x" }, spec: { region: "r" } }).expect(404);
    expect((await sim.api.get("/v0/egressips").expect(200)).body).toHaveLength(1);
    await sim.api.delete("/v0/vpcs/main").expect(200);
    expect((await sim.api.get("/v0/egressgateways").expect(200)).body).toHaveLength(0);
  });
});

describe("workspaces", () => {
  it("answers availability as a bare boolean or with reasons", async () => {
    expect((await sim.api.post("/v0/workspaces/availability", { name: "fresh" }).expect(200)).body).toBe(true);
    const reasons = async (name: string) => (await sim.api.post("/v0/workspaces/availability?withReason=true", { name }).expect(200)).body;
    expect(await reasons("default")).toMatchObject({ available: false, reason: "taken" });
    expect(await reasons("admin")).toMatchObject({ available: false, reason: "forbidden_reserved" });
    expect(await reasons("my-blaxel-ws")).toMatchObject({ available: false, reason: "forbidden_blaxel" });
    expect(await reasons("v12")).toMatchObject({ available: false, reason: "forbidden_v_prefix" });
    expect(await reasons("fresh")).toEqual({ available: true, message: "", reason: "" });
    const seed = await request(sim.app)
      .post("/v0/workspaces/availability?withReason=true")
      .set("X-Service-Authorization", `Bearer ${ADMIN_KEY}`)
      .send({ name: "blaxel" })
      .expect(200);
    expect(seed.body.reason).toBe("forbidden_service");
  });

  it("creates, lists and deletes workspaces; features list only enabled flags", async () => {
    await sim.api.post("/v0/workspaces", { name: "team-b", displayName: "Team B" }).expect(200);
    await sim.api.post("/v0/workspaces", { name: "team-b" }).expect(409);
    await sim.api.post("/v0/workspaces", { name: "api" }).expect(400);
    const list = await sim.api.get("/v0/workspaces").expect(200);
    expect(list.body.map((w: { name: string }) => w.name)).toContain("team-b");
    const features = await sim.api.get("/v0/features").expect(200);
    expect(Object.values(features.body.features).every((v) => v === true)).toBe(true);
    expect(features.body.features.gpu_flavors).toBeUndefined();
    await api(sim.app, ADMIN_KEY, "team-b")
      .post("/v0/sandboxes", { metadata: { name: "gone" } })
      .expect(200);
    await api(sim.app, ADMIN_KEY, "team-b").get("/v0/sandboxes/gone").expect(200);
    await sim.api.delete("/v0/workspaces/team-b").expect(200);
    await api(sim.app, ADMIN_KEY, "team-b").get("/v0/sandboxes").expect(403);
    // A new workspace of the same name starts empty.
    await sim.api.post("/v0/workspaces", { name: "team-b" }).expect(200);
    await api(sim.app, ADMIN_KEY, "team-b").get("/v0/sandboxes/gone").expect(404);
  });
});
