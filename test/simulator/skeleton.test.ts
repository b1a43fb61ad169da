import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, startTestSim } from "../helpers/simulator.js";

const sim = startTestSim();
afterAll(() => sim.close());

describe("server skeleton", () => {
  it("answers /health with JSON and no credential", async () => {
    const res = await request(sim.app).get("/health").expect(200);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.body.status).toBe("ok");
  });

  it("answers unknown routes with a JSON 404 {error, code, message}", async () => {
    const res = await sim.api.get("/v0/nope").expect(404);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.body).toMatchObject({ error: "not_found", code: 404 });
    expect(typeof res.body.message).toBe("string");
  });

  it("rejects an unknown API version with invalid_api_version listing the valid ones", async () => {
    const res = await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${ADMIN_KEY}`).set("Blaxel-Version", "2025-01-01").expect(400);
    expect(res.body.error).toBe("invalid_api_version");
    expect(res.body.message).toContain("2026-04-16");
    expect(res.body.message).toContain("2026-04-28.preview");
  });

  it("accepts the Service-Version spelling and the .preview forms", async () => {
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${ADMIN_KEY}`).set("Service-Version", "2026-04-20.preview").expect(200);
  });

  it("renders malformed JSON bodies as a 400 JSON error", async () => {
    const res = await request(sim.app)
      .post("/v0/sandboxes")
      .set("Authorization", `Bearer ${ADMIN_KEY}`)
      .set("Content-Type", "application/json")
      .send("{nope")
      .expect(400);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
  });
});
