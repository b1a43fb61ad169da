import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, api, startTestSim, type TestSim } from "../../helpers/simulator.js";

const dir = mkdtempSync(join(tmpdir(), "sim-secrets-"));
const data = join(dir, "sim.db");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`;

async function accessToken(sim: TestSim): Promise<string> {
  const sa = await sim.api.post("/v0/service_accounts", { name: "restart" }).expect(200);
  const res = await request(sim.app)
    .post("/v0/oauth/token")
    .set("Authorization", basic(sa.body.client_id, sa.body.client_secret))
    .send({ grant_type: "client_credentials" })
    .expect(200);
  return res.body.access_token as string;
}

async function firstPage(sim: TestSim): Promise<string> {
  for (const name of ["v1", "v2", "v3"]) await sim.api.post("/v0/volumes", { metadata: { name }, spec: { size: 1024 } }).expect(200);
  const res = await sim.api.get("/v0/volumes?limit=2").expect(200);
  expect(res.body.meta.hasMore).toBe(true);
  return res.body.meta.nextCursor as string;
}

describe("signing secrets with --data", () => {
  it("a simulator started again on the same file accepts the access tokens and cursors it handed out", async () => {
    const first = startTestSim({ data });
    const token = await accessToken(first);
    const cursor = await firstPage(first);
    first.close();

    const again = startTestSim({ data });
    try {
      await request(again.app).get("/v0/volumes").set("Authorization", `Bearer ${token}`).set("X-Blaxel-Workspace", "default").expect(200);
      const next = await api(again.app, ADMIN_KEY)
        .get(`/v0/volumes?limit=2&cursor=${encodeURIComponent(cursor)}`)
        .expect(200);
      expect(next.body.data).toHaveLength(1);
      expect(next.body.meta.hasMore).toBe(false);
    } finally {
      again.close();
    }
  });

  it("another simulator's tokens and cursors are still refused (each database has its own keys)", async () => {
    const other = startTestSim();
    const token = await accessToken(other);
    const cursor = await firstPage(other);
    other.close();

    const sim = startTestSim({ data });
    try {
      await request(sim.app).get("/v0/volumes").set("Authorization", `Bearer ${token}`).set("X-Blaxel-Workspace", "default").expect(401);
      const res = await sim.api.get(`/v0/volumes?limit=2&cursor=${encodeURIComponent(cursor)}`).expect(400);
      expect(res.body.message).toContain("cursor");
    } finally {
      sim.close();
    }
  });
});
