import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, api, startTestSim } from "../../helpers/simulator.js";

const sim = startTestSim();
afterAll(() => sim.close());

describe("sandboxes", () => {
  it("creates synchronously with status DEPLOYED, metadata and a url", async () => {
    const res = await sim.api
      .post("/v0/sandboxes", {
        metadata: { name: "demo", labels: { team: "a" } },
        spec: { region: "us-pdx-1", runtime: { image: "blaxel/base-image:latest", memory: 4096, generation: "mk3" } },
      })
      .expect(200);
    expect(res.body.status).toBe("DEPLOYED");
    expect(res.body.metadata).toMatchObject({ name: "demo", displayName: "demo", workspace: "default", labels: { team: "a" }, createdBy: "admin@local.test" });
    expect(res.body.metadata.url).toBe("http://127.0.0.1:8081/default/sandboxes/demo");
    expect(res.body.events.at(-1)).toMatchObject({ type: "deployment", status: "DEPLOYED" });
  });

  it("names a sandbox created without a name", async () => {
    const res = await sim.api.post("/v0/sandboxes", { metadata: {} }).expect(200);
    expect(res.body.metadata.name).toMatch(/^sandbox-[0-9a-f]{8}$/);
  });

  it("answers a duplicate with 409 in the SandboxError shape, and createIfNotExist returns the existing one", async () => {
    const dup = await sim.api.post("/v0/sandboxes", { metadata: { name: "demo" } }).expect(409);
    expect(dup.body).toMatchObject({ code: "SANDBOX_ALREADY_EXISTS", status_code: 409, sandbox_name: "demo" });
    expect(typeof dup.body.message).toBe("string");
    const again = await sim.api.post("/v0/sandboxes?createIfNotExist=true", { metadata: { name: "demo" } }).expect(200);
    expect(again.body.metadata.labels).toEqual({ team: "a" });
  });

  it("rejects unknown fields, wrong types and bad names with a 400 naming the field", async () => {
    const unknown = await sim.api.post("/v0/sandboxes", { metadata: { name: "x1" }, bogus: 1 }).expect(400);
    expect(unknown.body.message).toContain("bogus");
    const wrong = await sim.api.post("/v0/sandboxes", { metadata: { name: "x2" }, spec: { runtime: { memory: "lots" } } }).expect(400);
    expect(wrong.body.message).toContain("spec.runtime.memory");
    const bad = await sim.api.post("/v0/sandboxes", { metadata: { name: "Bad_Name" } }).expect(400);
    expect(bad.body.message).toContain("metadata.name");
    expect(bad.body.code).toBe("BAD_REQUEST");
  });

  it("an update ignores top-level fields it does not take (the SDK's lifecycle test spreads the spec there); spec stays strict", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "spread" }, spec: { runtime: { envs: [{ name: "A", value: "1" }] } } }).expect(200);
    const current = (await sim.api.get("/v0/sandboxes/spread").expect(200)).body;
    const spec = { ...current.spec, runtime: { ...current.spec.runtime, envs: [{ name: "A", value: "2" }] } };
    const updated = await sim.api.put("/v0/sandboxes/spread", { ...current.spec, metadata: current.metadata, spec }).expect(200);
    expect(updated.body.spec.runtime.envs).toEqual([{ name: "A", value: "2" }]);
    expect(updated.body).not.toHaveProperty("runtime");
    expect(updated.body).not.toHaveProperty("region");
    const typo = await sim.api.put("/v0/sandboxes/spread", { metadata: current.metadata, spec: { ...spec, runtim: {} } }).expect(400);
    expect(typo.body.message).toContain("runtim");
    await sim.api.delete("/v0/sandboxes/spread").expect(200);
  });

  it("gets, updates and deletes; 404 in the _Error shape afterwards", async () => {
    await sim.api.put("/v0/sandboxes/demo", { metadata: { displayName: "Demo" }, spec: { runtime: { memory: 2048 } } }).expect(200);
    const got = await sim.api.get("/v0/sandboxes/demo").expect(200);
    expect(got.body.metadata.displayName).toBe("Demo");
    expect(got.body.spec.runtime.memory).toBe(2048);
    const renamed = await sim.api.put("/v0/sandboxes/demo", { metadata: { name: "other" } }).expect(400);
    expect(renamed.body.message).toContain("metadata.name");
    const deleted = await sim.api.delete("/v0/sandboxes/demo").expect(200);
    expect(deleted.body.status).toBe("DELETING");
    const missing = await sim.api.get("/v0/sandboxes/demo").expect(404);
    expect(missing.body).toMatchObject({ error: "not_found", code: 404 });
  });

  it("masks secret envs unless an admin passes show_secrets=true", async () => {
    await sim.api
      .post("/v0/sandboxes", {
        metadata: { name: "sec" },
        spec: {
          runtime: {
            envs: [
              { name: "TOKEN", value: "s3cret", secret: true },
              { name: "MODE", value: "dev" },
            ],
          },
        },
      })
      .expect(200);
    const masked = await sim.api.get("/v0/sandboxes/sec").expect(200);
    expect(masked.body.spec.runtime.envs).toEqual([
      { name: "TOKEN", value: "***", secret: true },
      { name: "MODE", value: "dev" },
    ]);
    const shown = await sim.api.get("/v0/sandboxes/sec?show_secrets=true").expect(200);
    expect(shown.body.spec.runtime.envs[0].value).toBe("s3cret");
    await request(sim.app)
      .post("/_sim/seed")
      .send({ users: [{ email: "m@local.test", accountId: "local", workspaces: ["default"], apiKey: "member-key-01" }] })
      .expect(200);
    const member = await api(sim.app, "member-key-01").get("/v0/sandboxes/sec?show_secrets=true").expect(200);
    expect(member.body.spec.runtime.envs[0].value).toBe("***");
  });

  it("serves previews and preview tokens", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "web" } }).expect(200);
    const preview = await sim.api.post("/v0/sandboxes/web/previews", { metadata: { name: "p1" }, spec: { port: 3000, public: false } }).expect(200);
    expect(preview.body.spec).toMatchObject({ port: 3000, public: false });
    expect(preview.body.spec.url).toContain("/previews/p1");
    const token = await sim.api.post("/v0/sandboxes/web/previews/p1/tokens", { spec: { expiresAt: "2026-06-01T00:00:00Z" } }).expect(200);
    expect(token.body.spec).toMatchObject({ expiresAt: "2026-06-01T00:00:00Z", expired: false });
    expect(typeof token.body.spec.token).toBe("string");
    const tokens = await sim.api.get("/v0/sandboxes/web/previews/p1/tokens").expect(200);
    expect(tokens.body).toHaveLength(1);
    await sim.api.delete(`/v0/sandboxes/web/previews/p1/tokens/${token.body.metadata.name}`).expect(200);
    expect((await sim.api.get("/v0/sandboxes/web/previews").expect(200)).body).toHaveLength(1);
    await sim.api.get("/v0/sandboxes/nope/previews").expect(404);
  });

  it("archives and unarchives on the clock, appending events", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "arc" } }).expect(200);
    expect((await sim.api.post("/v0/sandboxes/arc/archive").expect(200)).body.status).toBe("ARCHIVING");
    sim.clock.advance(1000);
    const archived = await sim.api.get("/v0/sandboxes/arc").expect(200);
    expect(archived.body.status).toBe("ARCHIVED");
    expect(archived.body.events.map((e: { status: string }) => e.status)).toEqual(["DEPLOYED", "ARCHIVING", "ARCHIVED"]);
    await sim.api.post("/v0/sandboxes/arc/archive").expect(409);
  });
});

describe("pagination and versions", () => {
  const ws = "pages";
  const p = () => api(sim.app, ADMIN_KEY, ws);
  it("sets up 7 sandboxes", async () => {
    await request(sim.app)
      .post("/_sim/seed")
      .send({ workspaces: [{ name: ws, accountId: "local" }] })
      .expect(200);
    for (let i = 0; i < 7; i++) {
      await p()
        .post("/v0/sandboxes", { metadata: { name: `s${i}`, displayName: i === 3 ? "Special One" : undefined } })
        .expect(200);
      sim.clock.advance(1000);
    }
  });

  it("walks pages newest first with opaque cursors and an empty cursor at the end", async () => {
    const seen: string[] = [];
    let cursor = "";
    for (let page = 0; page < 5; page++) {
      const res = await p()
        .get(`/v0/sandboxes?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)
        .expect(200);
      expect(res.body.meta.total).toBe(7);
      seen.push(...res.body.data.map((s: { metadata: { name: string } }) => s.metadata.name));
      cursor = res.body.meta.nextCursor;
      expect(res.body.meta.hasMore).toBe(cursor !== "");
      if (!cursor) break;
    }
    expect(seen).toEqual(["s6", "s5", "s4", "s3", "s2", "s1", "s0"]);
  });

  it("anchor=end answers the tail page of a createdAt order", async () => {
    const tail = await p().get("/v0/sandboxes?limit=3&anchor=end").expect(200);
    expect(tail.body.data.map((s: { metadata: { name: string } }) => s.metadata.name)).toEqual(["s2", "s1", "s0"]);
    expect(tail.body.meta).toMatchObject({ hasMore: false, nextCursor: "" });
  });

  it("sorts by name, filters with q, clamps limit", async () => {
    const byName = await p().get("/v0/sandboxes?sort=name:asc&limit=500").expect(200);
    expect(byName.body.data.map((s: { metadata: { name: string } }) => s.metadata.name)).toEqual(["s0", "s1", "s2", "s3", "s4", "s5", "s6"]);
    const q = await p().get("/v0/sandboxes?q=special").expect(200);
    expect(q.body.data.map((s: { metadata: { name: string } }) => s.metadata.name)).toEqual(["s3"]);
    expect(q.body.meta.total).toBe(7);
    await p().get("/v0/sandboxes?sort=size:asc").expect(400);
    await p().get("/v0/sandboxes?limit=0").expect(400);
  });

  it("rejects a cursor reused with another query, tampered with, or older than 24 h", async () => {
    const first = await p().get("/v0/sandboxes?limit=2").expect(200);
    const cursor = encodeURIComponent(first.body.meta.nextCursor);
    const other = await p().get(`/v0/sandboxes?limit=2&sort=name:asc&cursor=${cursor}`).expect(400);
    expect(other.body.message).toContain("cursor");
    await p().get(`/v0/sandboxes?limit=2&cursor=${cursor}x`).expect(400);
    sim.clock.advance(24 * 3_600_000 + 1);
    await p().get(`/v0/sandboxes?limit=2&cursor=${cursor}`).expect(400);
  });

  it("answers a bare array below 2026-04-28 and with no version header", async () => {
    const old = await api(sim.app, ADMIN_KEY, ws, "2026-04-20").get("/v0/sandboxes?limit=2").expect(200);
    expect(Array.isArray(old.body)).toBe(true);
    expect(old.body).toHaveLength(7);
    const none = await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${ADMIN_KEY}`).set("X-Blaxel-Workspace", ws).expect(200);
    expect(Array.isArray(none.body)).toBe(true);
  });

  it("filters by status and rejects unknown statuses on every version", async () => {
    const res = await p().get("/v0/sandboxes?status=DEPLOYED").expect(200);
    expect(res.body.data).toHaveLength(7);
    await api(sim.app, ADMIN_KEY, ws, "2026-04-16").get("/v0/sandboxes?status=BOGUS").expect(400);
  });
});

describe("list filters and secret round trips", () => {
  it("hides TERMINATED sandboxes unless showTerminated=true or a status filter asks", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "ended", externalId: "ext-ended" } }).expect(200);
    await request(sim.app).post("/_sim/transitions/step").send({ kind: "sandbox", name: "ended", status: "TERMINATED" }).expect(200);
    const names = (body: { data: { metadata: { name: string } }[] }) => body.data.map((s) => s.metadata.name);
    expect(names((await sim.api.get("/v0/sandboxes?limit=200")).body)).not.toContain("ended");
    expect(names((await sim.api.get("/v0/sandboxes?limit=200&showTerminated=true")).body)).toContain("ended");
    expect(names((await sim.api.get("/v0/sandboxes?status=TERMINATED")).body)).toEqual(["ended"]);
    expect(names((await sim.api.get("/v0/sandboxes?externalId=ext-ended&showTerminated=true")).body)).toEqual(["ended"]);
  });

  it("keeps a stored secret when a masked value is sent back on update", async () => {
    await sim.api
      .post("/v0/sandboxes", { metadata: { name: "rt" }, spec: { runtime: { envs: [{ name: "TOKEN", value: "real", secret: true }] } } })
      .expect(200);
    const masked = (await sim.api.get("/v0/sandboxes/rt").expect(200)).body;
    expect(masked.spec.runtime.envs[0].value).toBe("***");
    await sim.api.put("/v0/sandboxes/rt", { metadata: masked.metadata, spec: masked.spec }).expect(200);
    expect((await sim.api.get("/v0/sandboxes/rt?show_secrets=true")).body.spec.runtime.envs[0].value).toBe("real");
  });
});
