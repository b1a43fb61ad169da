import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, api, startTestSim } from "../../helpers/simulator.js";

const sim = startTestSim();
afterAll(() => sim.close());

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`;

async function serviceAccount() {
  const res = await sim.api.post("/v0/service_accounts", { name: "ci", description: "pipeline" }).expect(200);
  expect(res.body).toMatchObject({ name: "ci", description: "pipeline" });
  expect(typeof res.body.client_secret).toBe("string");
  return res.body as { client_id: string; client_secret: string };
}

function decode(jwt: string) {
  return JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString("utf8")) as { iat: number; exp: number; scope: string };
}

describe("API keys and headers", () => {
  it("accepts the key in Authorization, X-Blaxel-Authorization and X-Service-Authorization", async () => {
    for (const header of ["Authorization", "X-Blaxel-Authorization", "X-Service-Authorization"]) {
      await request(sim.app).get("/v0/sandboxes").set(header, `Bearer ${ADMIN_KEY}`).set("X-Service-Workspace", "default").expect(200);
    }
  });

  it("selects the workspace by ?workspace= as well", async () => {
    await request(sim.app).get("/v0/sandboxes?workspace=default").set("Authorization", `Bearer ${ADMIN_KEY}`).expect(200);
  });

  it("answers 401 for a missing or unknown credential", async () => {
    const none = await request(sim.app).get("/v0/sandboxes").expect(401);
    expect(none.body).toMatchObject({ error: "unauthorized", code: 401 });
    await request(sim.app).get("/v0/sandboxes").set("Authorization", "Bearer nope-nope-nope").expect(401);
  });

  it("answers 403 for a workspace the credential does not belong to", async () => {
    await sim.api.post("/_sim/seed", {});
    await request(sim.app)
      .post("/_sim/seed")
      .send({ accounts: [{ id: "other" }], workspaces: [{ name: "elsewhere", accountId: "other" }] })
      .expect(200);
    const res = await api(sim.app, ADMIN_KEY, "elsewhere").get("/v0/sandboxes").expect(403);
    expect(res.body.code).toBe(403);
  });

  it("lets seeded users' keys work, members see only their workspaces", async () => {
    await request(sim.app)
      .post("/_sim/seed")
      .send({ users: [{ email: "mia@other.test", accountId: "other", role: "member", workspaces: ["elsewhere"], apiKey: "mia-key-0001" }] })
      .expect(200);
    await api(sim.app, "mia-key-0001", "elsewhere").get("/v0/sandboxes").expect(200);
    await api(sim.app, "mia-key-0001", "default").get("/v0/sandboxes").expect(403);
  });
});

describe("OAuth", () => {
  it("issues a JWT access token for client_credentials (Basic header) with numeric iat/exp two hours apart", async () => {
    const sa = await serviceAccount();
    const res = await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials" })
      .expect(200);
    expect(res.body).toMatchObject({ token_type: "Bearer", expires_in: 7200 });
    const claims = decode(res.body.access_token);
    expect(claims.exp - claims.iat).toBe(7200);
    await request(sim.app).get("/v0/sandboxes").set("X-Blaxel-Authorization", `Bearer ${res.body.access_token}`).expect(200);
  });

  it("accepts client credentials in the body too, and rejects a wrong secret with 401", async () => {
    const sa = await serviceAccount();
    await request(sim.app)
      .post("/v0/oauth/token")
      .send({ grant_type: "client_credentials", client_id: sa.client_id, client_secret: sa.client_secret })
      .expect(200);
    const bad = await request(sim.app)
      .post("/v0/oauth/token")
      .send({ grant_type: "client_credentials", client_id: sa.client_id, client_secret: "wrong" })
      .expect(401);
    expect(bad.body.error).toBe("invalid_client");
    const missing = await request(sim.app).post("/v0/oauth/token").send({}).expect(400);
    expect(missing.body.message).toContain("grant_type");
  });

  it("rejects an expired access token with 401", async () => {
    const sa = await serviceAccount();
    const { body } = await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials" });
    sim.clock.advance(2 * 3_600_000 + 1000);
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${body.access_token}`).expect(401);
  });

  it("enforces scopes: a sandboxes:list token may list but not create (403)", async () => {
    const sa = await serviceAccount();
    const { body } = await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials", scope: "sandboxes:list" })
      .expect(200);
    const auth = { Authorization: `Bearer ${body.access_token}` };
    await request(sim.app).get("/v0/sandboxes").set(auth).expect(200);
    const denied = await request(sim.app)
      .post("/v0/sandboxes")
      .set(auth)
      .send({ metadata: { name: "nope" } })
      .expect(403);
    expect(denied.body.message).toContain("sandboxes:create");
    await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials", scope: "bogus:scope" })
      .expect(400);
  });

  it("a service account is confined to its own workspace (403 elsewhere)", async () => {
    await request(sim.app)
      .post("/_sim/seed")
      .send({ workspaces: [{ name: "second", accountId: "local" }] })
      .expect(200);
    const sa = await serviceAccount();
    const { body } = await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials" });
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${body.access_token}`).set("X-Blaxel-Workspace", "second").expect(403);
  });

  it("deleting a service account invalidates its secret, keys and tokens at once", async () => {
    const sa = await serviceAccount();
    const key = await sim.api.post(`/v0/service_accounts/${sa.client_id}/api_keys`, { name: "k", expires_in: "30d" }).expect(200);
    expect(key.body).toMatchObject({ name: "k", expires_in: "30d", sub_type: "service_account" });
    const { body } = await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials" });
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${key.body.apiKey}`).expect(200);
    await sim.api.delete(`/v0/service_accounts/${sa.client_id}`).expect(200);
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${key.body.apiKey}`).expect(401);
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${body.access_token}`).expect(401);
    await request(sim.app)
      .post("/v0/oauth/token")
      .set("Authorization", basic(sa.client_id, sa.client_secret))
      .send({ grant_type: "client_credentials" })
      .expect(401);
  });

  it("rejects an API key after its expires_in has passed", async () => {
    const sa = await serviceAccount();
    const key = await sim.api.post(`/v0/service_accounts/${sa.client_id}/api_keys`, { name: "short", expires_in: "1h" }).expect(200);
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${key.body.apiKey}`).expect(200);
    sim.clock.advance(3_600_000 + 1);
    const res = await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${key.body.apiKey}`).expect(401);
    expect(res.body.message).toContain("expired");
    await sim.api.post(`/v0/service_accounts/${sa.client_id}/api_keys`, { expires_in: "soon" }).expect(400);
  });

  it("runs authorization_code (the user's own key, a registered client) then refresh_token; codes are single-use", async () => {
    await request(sim.app)
      .post("/_sim/seed")
      .send({
        users: [{ email: "ann@local.test", accountId: "local", role: "member", workspaces: ["default"], apiKey: "ann-key-00001" }],
        oauthClients: [{ clientId: "app", redirectUris: ["http://127.0.0.1:9/cb"] }],
      })
      .expect(200);
    const auth = await request(sim.app)
      .get("/v0/oauth/authorize")
      .set("Authorization", "Bearer ann-key-00001")
      .query({ response_type: "code", client_id: "app", redirect_uri: "http://127.0.0.1:9/cb", state: "s1" })
      .expect(302);
    const location = new URL(auth.headers.location!);
    expect(location.searchParams.get("state")).toBe("s1");
    const code = location.searchParams.get("code")!;
    const wrongUri = await request(sim.app)
      .post("/v0/oauth/token")
      .type("form")
      .send({ grant_type: "authorization_code", code, redirect_uri: "http://evil/cb", client_id: "app" })
      .expect(400);
    expect(wrongUri.body.error).toBe("invalid_grant");
    // the failed attempt consumed the code
    await request(sim.app)
      .post("/v0/oauth/token")
      .type("form")
      .send({ grant_type: "authorization_code", code, redirect_uri: "http://127.0.0.1:9/cb", client_id: "app" })
      .expect(400);
    // the login form: the key in the POST body, the client's only redirect URI by default
    const again = await request(sim.app)
      .post("/v0/oauth/authorize")
      .type("form")
      .send({ response_type: "code", client_id: "app", api_key: "ann-key-00001" })
      .expect(302);
    expect(again.headers.location).toMatch(/^http:\/\/127\.0\.0\.1:9\/cb\?code=/);
    const tokens = await request(sim.app)
      .post("/v0/oauth/token")
      .type("form")
      .send({ grant_type: "authorization_code", code: again.body.code, client_id: "app" })
      .expect(200);
    expect(typeof tokens.body.refresh_token).toBe("string");
    await request(sim.app).get("/v0/sandboxes").set("Authorization", `Bearer ${tokens.body.access_token}`).set("X-Blaxel-Workspace", "default").expect(200);
    const refreshed = await request(sim.app)
      .post("/v0/oauth/token")
      .send({ grant_type: "refresh_token", refresh_token: tokens.body.refresh_token })
      .expect(200);
    expect(refreshed.body.refresh_token).not.toBe(tokens.body.refresh_token);
    await request(sim.app).post("/v0/oauth/token").send({ grant_type: "refresh_token", refresh_token: tokens.body.refresh_token }).expect(400);
  });

  it("a member may not read secrets nor manage service accounts", async () => {
    await request(sim.app)
      .post("/_sim/seed")
      .send({ users: [{ email: "bo@local.test", accountId: "local", role: "member", workspaces: ["default"], apiKey: "bo-key-00001" }] })
      .expect(200);
    await api(sim.app, "bo-key-00001").post("/v0/service_accounts", { name: "x" }).expect(403);
  });
});
