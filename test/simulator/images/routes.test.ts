import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startTestSim, ADMIN_KEY } from "../../helpers/simulator.js";

const sim = startTestSim();
afterAll(() => sim.close());
const other = () => api(sim.app, "other-admin-key", "partner");
const sibling = () => api(sim.app, ADMIN_KEY, "sibling");

beforeAll(async () => {
  await request(sim.app)
    .post("/_sim/seed")
    .send({
      accounts: [{ id: "partner-co" }],
      workspaces: [
        { name: "sibling", accountId: "local" },
        { name: "partner", accountId: "partner-co" },
      ],
      users: [
        { email: "boss@partner.test", accountId: "partner-co", role: "admin", workspaces: ["partner"], apiKey: "other-admin-key" },
        { email: "dev@partner.test", accountId: "partner-co", role: "member", workspaces: ["partner"], apiKey: "other-member-key" },
      ],
    })
    .expect(200);
  await sim.api.post("/v0/images", { name: "web", resourceType: "sandbox", image: "web:v1" }).expect(200);
  await sim.api.post("/v0/images", { name: "web", resourceType: "sandbox", image: "web:v2" }).expect(200);
});

describe("images", () => {
  it("registers tags that share a base layer", async () => {
    const image = await sim.api.get("/v0/images/sandboxes/web").expect(200);
    expect(image.body.spec.tags.map((t: { name: string }) => t.name)).toEqual(["v1", "v2"]);
    // base layer counted once
    expect(image.body.spec.size).toBe(image.body.spec.tags[0].size + image.body.spec.tags[1].size - 50 * 2 ** 20);
    await sim.api.post("/v0/images", { name: "web", resourceType: "planet" }).expect(400);
  });

  it("refuses to delete a tag in use (409) and keeps layers other tags reference", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "uses-v1" }, spec: { runtime: { image: "registry.local/web:v1" } } }).expect(200);
    await sim.api.delete("/v0/images/sandboxes/web/tags/v1").expect(409);
    const after = await sim.api.delete("/v0/images/sandboxes/web/tags/v2").expect(200);
    expect(after.body.spec.tags.map((t: { name: string }) => t.name)).toEqual(["v1"]);
    expect(after.body.spec.size).toBe(after.body.spec.tags[0].size);
    expect(after.body.spec.size).toBeGreaterThan(50 * 2 ** 20);
    await sim.api.delete("/v0/images/sandboxes/web/tags/nope").expect(404);
  });

  it("counts an application running a tag (its active revision's image) as a user of it", async () => {
    await sim.api.post("/v0/images", { name: "app-img", resourceType: "sandbox", image: "app-img:v1" }).expect(200);
    await sim.api.post("/v0/applications", { metadata: { name: "runs-app-img" }, spec: { revisions: [{ image: "sandbox/app-img:v1" }] } }).expect(200);
    const refused = await sim.api.delete("/v0/images/sandboxes/app-img/tags/v1").expect(409);
    expect(refused.body.message).toContain("application runs-app-img");
    await sim.api.delete("/v0/applications/runs-app-img").expect(200);
    await sim.api.delete("/v0/images/sandboxes/app-img/tags/v1").expect(200);
  });

  it("shares within the account at once (200, metadata copied with sourceWorkspace)", async () => {
    const res = await sim.api.post("/v0/images/sandboxes/web/share", { targetWorkspace: "sibling" }).expect(200);
    expect(res.body.metadata).toMatchObject({ name: "web", workspace: "sibling", sourceWorkspace: "default" });
    const copy = await sibling().get("/v0/images/sandboxes/web").expect(200);
    expect(copy.body.spec.size).toBe((await sim.api.get("/v0/images/sandboxes/web")).body.spec.size);
    await sim.api.post("/v0/images/sandboxes/web/share", { targetWorkspace: "sibling" }).expect(409);
  });

  it("shares across accounts as a pending share (202) that only a target admin may accept", async () => {
    await sim.api.post("/v0/images/sandboxes/web/share", { targetWorkspace: "partner", targetAccountId: "wrong" }).expect(400);
    const pending = await sim.api.post("/v0/images/sandboxes/web/share", { targetWorkspace: "partner", targetAccountId: "partner-co" }).expect(202);
    expect(pending.body).toMatchObject({ imageName: "web", sourceWorkspace: "default", targetWorkspace: "partner", targetAccountId: "partner-co" });
    const shares = await sim.api.get("/v0/images/sandboxes/web/share").expect(200);
    expect(shares.body.find((s: { workspace: string }) => s.workspace === "partner")).toMatchObject({ status: "pending", pendingShareId: pending.body.id });
    const incoming = await other().get("/v0/pending-image-shares?direction=incoming").expect(200);
    expect(incoming.body.map((s: { id: string }) => s.id)).toEqual([pending.body.id]);
    await api(sim.app, "other-member-key", "partner").post(`/v0/pending-image-shares/${pending.body.id}/accept`).expect(403);
    await sim.api.post(`/v0/pending-image-shares/${pending.body.id}/accept`).expect(403);
    const accepted = await other().post(`/v0/pending-image-shares/${pending.body.id}/accept`).expect(200);
    expect(accepted.body.metadata).toMatchObject({ workspace: "partner", sourceWorkspace: "default" });
    await other().get("/v0/images/sandboxes/web").expect(200);
  });

  it("answers 410 for a pending share accepted after it expired (7 days)", async () => {
    await sim.api.post("/v0/images", { name: "old", resourceType: "job" }).expect(200);
    const pending = await sim.api.post("/v0/images/jobs/old/share", { targetWorkspace: "partner", targetAccountId: "partner-co" }).expect(202);
    sim.clock.advance(7 * 24 * 3_600_000 + 1);
    const gone = await other().post(`/v0/pending-image-shares/${pending.body.id}/accept`).expect(410);
    expect(gone.body).toMatchObject({ error: "gone", code: 410 });
  });

  it("declines with 204 and removes the pending share", async () => {
    await sim.api.post("/v0/images", { name: "api", resourceType: "agent" }).expect(200);
    const pending = await sim.api.post("/v0/images/agents/api/share", { targetWorkspace: "partner", targetAccountId: "partner-co" }).expect(202);
    await other().post(`/v0/pending-image-shares/${pending.body.id}/decline`).expect(204);
    await other().post(`/v0/pending-image-shares/${pending.body.id}/accept`).expect(404);
    expect((await sim.api.get("/v0/images/agents/api/share")).body).toEqual([]);
  });
});
