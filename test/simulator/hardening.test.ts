import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isScope } from "../../simulator/auth/scopes.js";
import { ImageUploads } from "../../simulator/sandboxes/image-uploads.js";
import { allOperations } from "../../simulator/operations.js";
import { ADMIN_KEY, api, startTestSim } from "../helpers/simulator.js";

/**
 * Hostile requests on the control plane (the sandbox URL's
 * share is in agents/hardening.test.ts): each test replays what the hostile
 * tester did and fails on the code before the fix.
 */
const sim = startTestSim();
afterAll(() => sim.close());

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`;

beforeAll(async () => {
  await request(sim.app)
    .post("/_sim/seed")
    .send({
      accounts: [{ id: "other-co" }],
      workspaces: [
        { name: "team-b", accountId: "local" },
        { name: "far", accountId: "other-co" },
      ],
      users: [
        { email: "mel@local.test", accountId: "local", role: "member", workspaces: ["default"], apiKey: "mel-key-0001" },
        { email: "ops@local.test", accountId: "local", role: "member", workspaces: ["default", "team-b"], apiKey: "ops-key-0001" },
      ],
      oauthClients: [{ clientId: "webapp", redirectUris: ["https://app.example/cb", "http://127.0.0.1:9/cb"] }],
    })
    .expect(200);
});

async function clientToken(scope: string): Promise<string> {
  const sa = await sim.api.post("/v0/service_accounts", { name: `sa-${scope.replace(/\W/g, "-")}` }).expect(200);
  const res = await request(sim.app)
    .post("/v0/oauth/token")
    .set("Authorization", basic(sa.body.client_id, sa.body.client_secret))
    .send({ grant_type: "client_credentials", scope })
    .expect(200);
  return res.body.access_token as string;
}

describe("1. OAuth authorize needs the user's credential and a registered client", () => {
  const authorize = (query: Record<string, string>) =>
    request(sim.app)
      .get("/v0/oauth/authorize")
      .query({ response_type: "code", client_id: "webapp", redirect_uri: "https://app.example/cb", ...query });

  it("login_hint alone gets no code (the admin token attack)", async () => {
    const res = await authorize({ login_hint: "admin@local.test" }).expect(401);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toMatchObject({ error: "login_required" });
    expect(JSON.stringify(res.body)).not.toMatch(/"code":"[A-Za-z0-9_-]{20,}"/);
  });

  it("a key in the URL is not a login; a key of another user than login_hint is refused", async () => {
    await authorize({ api_key: ADMIN_KEY }).expect(401);
    await authorize({ login_hint: "admin@local.test" }).set("Authorization", "Bearer mel-key-0001").expect(403);
  });

  it("an unregistered client or redirect URI is a 400, never a redirect; an invalid URI is a 400, not a 500", async () => {
    const cases: Record<string, string>[] = [
      { client_id: "nobody" },
      { redirect_uri: "https://evil.example/cb" },
      { redirect_uri: "::not a url::" },
      { redirect_uri: "javascript:alert(1)//https://app.example/cb" },
      { redirect_uri: "data:text/html,x" },
    ];
    for (const query of cases) {
      const res = await authorize(query).set("Authorization", `Bearer ${ADMIN_KEY}`);
      expect(res.status, JSON.stringify(query)).toBe(400);
      expect(res.headers.location).toBeUndefined();
    }
  });

  it("non-http(s) redirect URIs cannot be registered", async () => {
    const res = await request(sim.app)
      .post("/_sim/seed")
      .send({ oauthClients: [{ clientId: "js", redirectUris: ["javascript:alert(1)"] }] })
      .expect(400);
    expect(res.body.message).toContain("javascript");
  });

  it("a code's scope is at most the credential's", async () => {
    const narrow = await clientToken("sandboxes:get");
    // a service account's token is not a user login
    await authorize({}).set("Authorization", `Bearer ${narrow}`).expect(403);
    const res = await authorize({ scope: "sandboxes:list" }).set("Authorization", "Bearer mel-key-0001").expect(302);
    const code = new URL(res.headers.location!).searchParams.get("code")!;
    const tokens = await request(sim.app)
      .post("/v0/oauth/token")
      .send({ grant_type: "authorization_code", code, client_id: "webapp", redirect_uri: "https://app.example/cb" })
      .expect(200);
    expect(tokens.body.scope).toBe("sandboxes:list");
  });

  it("the token endpoint requires the client the code was issued to", async () => {
    const res = await request(sim.app)
      .post("/v0/oauth/authorize")
      .type("form")
      .send({ response_type: "code", client_id: "webapp", redirect_uri: "http://127.0.0.1:9/cb", api_key: "mel-key-0001" })
      .expect(302);
    const code = new URL(res.headers.location!).searchParams.get("code")!;
    const bad = await request(sim.app)
      .post("/v0/oauth/token")
      .send({ grant_type: "authorization_code", code, redirect_uri: "http://127.0.0.1:9/cb" })
      .expect(400);
    expect(bad.body.error).toBe("invalid_grant");
  });
});

describe("2. every operation checks an explicit scope", () => {
  it("walks the whole operations table: each operation names a known scope", () => {
    const missing = allOperations(sim.deps, new ImageUploads(undefined))
      .filter((op) => typeof op.scope !== "string" || !isScope(op.scope))
      .map((op) => op.id);
    expect(missing).toEqual([]);
  });

  it("a sandboxes:get token cannot mint a service account, an API key, a member or a workspace", async () => {
    const token = await clientToken("sandboxes:get");
    const as = api(sim.app, token);
    await as.get("/v0/sandboxes/none").expect(404); // its own scope still works
    await as.post("/v0/service_accounts", { name: "escalate" }).expect(403);
    await as.get("/v0/service_accounts").expect(403);
    await as.post("/v0/users", { email: "x@local.test" }).expect(403);
    await as.get("/v0/images").expect(403);
    await request(sim.app).post("/v0/workspaces").set("Authorization", `Bearer ${token}`).send({ name: "mine" }).expect(403);
  });

  it("a drive access token reads its own drive and nothing else", async () => {
    await sim.api.post("/v0/drives", { metadata: { name: "vault" }, spec: {} }).expect(200);
    await sim.api.post("/v0/drives", { metadata: { name: "other" }, spec: {} }).expect(200);
    const { body } = await sim.api.post("/v0/drives/vault/access-token").expect(200);
    const as = api(sim.app, body.access_token);
    await as.get("/v0/drives/vault").expect(200);
    // a drive of the same name in another workspace of the same user is not its drive
    await api(sim.app, ADMIN_KEY, "team-b")
      .post("/v0/drives", { metadata: { name: "vault" }, spec: {} })
      .expect(200);
    await api(sim.app, body.access_token, "team-b").get("/v0/drives/vault").expect(403);
    await as.get("/v0/drives/other").expect(403);
    await as.get("/v0/drives").expect(403);
    await as.delete("/v0/drives/vault").expect(403);
    await as.post("/v0/service_accounts", { name: "escalate" }).expect(403);
    await as.get("/v0/sandboxes").expect(403);
    await request(sim.app)
      .get("/v0/accounts/local/metrics")
      .set("Authorization", `Bearer ${body.access_token}`)
      .query({ startTime: "2026-05-01T00:00:00Z", endTime: "2026-05-02T00:00:00Z" })
      .expect(403);
  });
});

describe("3. image share into another workspace", () => {
  it("a member of the source only may not share into the target (403), and the target's image stays", async () => {
    await api(sim.app, ADMIN_KEY, "team-b").post("/v0/images", { name: "web", resourceType: "sandbox", image: "web:prod" }).expect(200);
    await api(sim.app, "mel-key-0001").post("/v0/images", { name: "web", resourceType: "sandbox", image: "web:evil" }).expect(200);
    await api(sim.app, "mel-key-0001").post("/v0/images/sandboxes/web/share", { targetWorkspace: "team-b" }).expect(403);
    // a member of both (not an admin of the target) is refused too
    await api(sim.app, "ops-key-0001").post("/v0/images/sandboxes/web/share", { targetWorkspace: "team-b" }).expect(403);
    const kept = await api(sim.app, ADMIN_KEY, "team-b").get("/v0/images/sandboxes/web").expect(200);
    expect(kept.body.spec.tags.map((t: { name: string }) => t.name)).toEqual(["prod"]);
    expect(kept.body.metadata.sourceWorkspace).toBeUndefined();
  });

  it("an admin of both: a clashing tag is a 409, other tags are added beside the target's own", async () => {
    await sim.api.post("/v0/images", { name: "web", resourceType: "sandbox", image: "web:prod" }).expect(200);
    await sim.api.post("/v0/images/sandboxes/web/share", { targetWorkspace: "team-b" }).expect(409);
    await sim.api.post("/v0/images", { name: "api", resourceType: "sandbox", image: "api:v2" }).expect(200);
    await api(sim.app, ADMIN_KEY, "team-b").post("/v0/images", { name: "api", resourceType: "sandbox", image: "api:v1" }).expect(200);
    await sim.api.post("/v0/images/sandboxes/api/share", { targetWorkspace: "team-b" }).expect(200);
    const merged = await api(sim.app, ADMIN_KEY, "team-b").get("/v0/images/sandboxes/api").expect(200);
    expect(merged.body.spec.tags.map((t: { name: string }) => t.name).sort()).toEqual(["v1", "v2"]);
  });
});

describe("4. secrets", () => {
  it("a schedule env value sent back as *** keeps the stored one (records-only backend)", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "cron-box" }, spec: {} }).expect(200);
    const created = await sim.api
      .post("/v0/sandboxes/cron-box/schedules", { type: "cron", value: "0 * * * *", input: { command: "run", env: { TOKEN: "s3cret" } } })
      .expect(200);
    const read = await sim.api.get(`/v0/sandboxes/cron-box/schedules/${created.body.id}`).expect(200);
    expect(read.body.input.env.TOKEN).toBe("***");
    await sim.api
      .put(`/v0/sandboxes/cron-box/schedules/${created.body.id}`, { type: read.body.type, value: read.body.value, input: read.body.input })
      .expect(200);
    const shown = await sim.api.get(`/v0/sandboxes/cron-box/schedules/${created.body.id}?show_secrets=true`).expect(200);
    expect(shown.body.input.env.TOKEN).toBe("s3cret");
  });

  it("sandbox proxy routing secrets: the create echoes them as sent, nothing else returns them; a PUT without them or with *** keeps them", async () => {
    const network = {
      proxy: { routing: [{ destinations: ["api.example.com"], headers: { Authorization: "Bearer {{SECRET:key}}" }, secrets: { key: "sk-live-123" } }] },
    };
    // As on the platform (the SDK's proxy create test): the create's answer only.
    const created = await sim.api.post("/v0/sandboxes", { metadata: { name: "routed" }, spec: { network } }).expect(200);
    expect(created.body.spec.network.proxy.routing[0].secrets).toEqual({ key: "sk-live-123" });
    // createIfNotExist answering the existing sandbox is a read: no secrets.
    const again = await sim.api.post("/v0/sandboxes?createIfNotExist=true", { metadata: { name: "routed" }, spec: { network } }).expect(200);
    expect(again.body.spec.network.proxy.routing[0]).not.toHaveProperty("secrets");
    for (const path of ["/v0/sandboxes/routed", "/v0/sandboxes/routed?show_secrets=true"]) {
      const got = await sim.api.get(path).expect(200);
      expect(got.body.spec.network.proxy.routing[0]).not.toHaveProperty("secrets");
    }
    const listed = await sim.api.get("/v0/sandboxes").expect(200);
    expect(JSON.stringify(listed.body)).not.toContain("sk-live-123");
    const got = await sim.api.get("/v0/sandboxes/routed").expect(200);
    const put = await sim.api.put("/v0/sandboxes/routed", { metadata: got.body.metadata, spec: got.body.spec }).expect(200);
    expect(JSON.stringify(put.body)).not.toContain("sk-live-123");
    const stored = () => sim.deps.resources.get<{ spec: { network: typeof network } }>("default", "sandbox", "routed")!.doc.spec.network.proxy.routing[0]!;
    expect(stored().secrets).toEqual({ key: "sk-live-123" });
    const masked = { ...network.proxy.routing[0], secrets: { key: "***" } };
    await sim.api.put("/v0/sandboxes/routed", { metadata: got.body.metadata, spec: { network: { proxy: { routing: [masked] } } } }).expect(200);
    expect(stored().secrets).toEqual({ key: "sk-live-123" });
    // Other destinations: the rule is another one, its secrets are not carried over (a 400: the header names a missing secret).
    const moved = { ...network.proxy.routing[0], destinations: ["other.example.com"], secrets: undefined };
    await sim.api.put("/v0/sandboxes/routed", { metadata: got.body.metadata, spec: { network: { proxy: { routing: [moved] } } } }).expect(400);
    expect(stored().secrets).toEqual({ key: "sk-live-123" });
  });
});

describe("6. bodies are not read before authentication", () => {
  it("an anonymous body is refused 401 before it is parsed (not 400 for its JSON) and the connection closes", async () => {
    const res = await request(sim.app).post("/v0/sandboxes").set("Content-Type", "application/json").send("{not json").expect(401);
    expect(res.headers.connection).toBe("close");
  });

  it("bodies read before authentication (OAuth, unknown routes) are capped small", async () => {
    const big = "x".repeat(100 * 1024);
    await request(sim.app).post("/v0/oauth/token").type("form").send({ grant_type: "client_credentials", pad: big }).expect(413);
    await request(sim.app)
      .post("/v0/no-such-route")
      .set("Content-Type", "application/json")
      .send(JSON.stringify({ pad: big }))
      .expect(413);
  });
});
