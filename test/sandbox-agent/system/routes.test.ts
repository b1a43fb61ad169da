import { writeFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { goDuration, UNAVAILABLE_ROUTES, WELCOME } from "../../../sandbox-agent/system/routes.js";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";

const TOKEN = "system-token";
let agent: TestAgent;
let metadata: string;
const auth = { Authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  metadata = join(tempDir(), "metadata.json");
  agent = await startTestAgent({ token: TOKEN, metadataPath: metadata });
});
afterAll(() => agent.stop());

describe("welcome and health (reference §9.10, §5.3)", () => {
  it.each(["get", "post", "put", "delete", "patch"] as const)("%s / → the welcome", async (method) => {
    expect((await request(agent.url)[method]("/").set(auth).expect(200)).body).toEqual(WELCOME);
  });

  it("/health carries the reference's fields, without auth", async () => {
    const body = (await request(agent.url).get("/health").expect(200)).body;
    expect(body).toMatchObject({
      status: "ok",
      gitCommit: "unknown",
      buildTime: "unknown",
      upgradeCount: 0,
      lastUpgrade: { status: "idle", step: "none", version: "" },
    });
    for (const key of ["version", "goVersion", "os", "arch", "uptime", "startedAt"]) expect(typeof body[key]).toBe("string");
    expect(typeof body.uptimeSeconds).toBe("number");
  });

  it("formats durations as Go does", () => {
    expect(goDuration(750)).toBe("750ms");
    expect(goDuration(2_500)).toBe("2.5s");
    expect(goDuration(123_000)).toBe("2m3s");
    expect(goDuration(5_400_000)).toBe("1h30m0s");
  });
});

describe("routes the agent will never have → 501 naming them", () => {
  it.each(UNAVAILABLE_ROUTES.map((r) => [r.method === "all" ? "get" : r.method, r.path.replace(/\{\*\w+\}/, "x/y"), r.what] as const))(
    "%s %s",
    async (method, path, what) => {
      const res = await request(agent.url)[method](path).set(auth).expect(501);
      expect(res.headers["content-type"]).toMatch(/application\/json/);
      expect(res.body.error).toContain(what);
    },
  );

  it("still behind auth", async () => {
    await request(agent.url).post("/upgrade").expect(401);
  });
});

describe("POST /environment/reload", () => {
  it("404 without the metadata document; then sets, replaces and removes the variables new processes get", async () => {
    expect((await request(agent.url).post("/environment/reload").set(auth).expect(404)).body.error).toMatch(/not found/);
    writeFileSync(metadata, JSON.stringify({ generation: 3, environment: { GREETING: "hello", OTHER: "x" } }));
    expect((await request(agent.url).post("/environment/reload").set(auth).expect(200)).body).toEqual({ generation: 3, applied: 2, removed: 0 });
    const run = async () =>
      (await request(agent.url).post("/process").set(auth).send({ command: 'echo "$GREETING ${OTHER:-none}"', waitForCompletion: true }).expect(200)).body
        .stdout;
    expect(await run()).toBe("hello x\n");
    writeFileSync(metadata, JSON.stringify({ generation: 4, environment: { GREETING: "bye" } }));
    expect((await request(agent.url).post("/environment/reload").set(auth).expect(200)).body).toEqual({ generation: 4, applied: 1, removed: 1 });
    expect(await run()).toBe("bye none\n");
    writeFileSync(metadata, "{not json");
    expect((await request(agent.url).post("/environment/reload").set(auth).expect(500)).body.error).toMatch(/invalid metadata document/);
  });
});
