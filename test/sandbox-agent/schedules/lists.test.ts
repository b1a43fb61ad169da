import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

let agent: TestAgent;
let secured: TestAgent;
const TOKEN = "agent-token-123";

beforeAll(async () => {
  agent = await startTestAgent({ sandboxName: "lists" });
  secured = await startTestAgent({ token: TOKEN });
  const api = request(agent.url);
  for (let i = 0; i < 25; i++)
    await api
      .post("/schedules")
      .send({ id: `s${String(i).padStart(2, "0")}`, type: "cron", value: "0 3 * * *", input: { command: "true" } })
      .expect(200);
  await api
    .post("/schedules")
    .send({ id: "one-off", type: "sleep", value: "2h", input: { command: "true" } })
    .expect(200);
  // Execution history recorded straight into the store: 25 for s00 (5 failed), 3 for s01.
  const store = agent.runtime.deps.schedules.store;
  const base = {
    sandbox: "lists",
    trigger: "manual" as const,
    due_at: null,
    executed_at: 0,
    completed_at: 0,
    status_code: 200,
    exit_code: 0,
    process_name: "p",
    timeout: 600,
    error: "",
    output: "",
  };
  for (let i = 0; i < 25; i++)
    store.recordExecution({ ...base, id: `x${i}`, schedule_id: "s00", created_at: i, status: i % 5 === 0 ? "failed" : "succeeded" }, 100);
  for (let i = 0; i < 3; i++) store.recordExecution({ ...base, id: `y${i}`, schedule_id: "s01", created_at: 100 + i, status: "succeeded" }, 100);
});
afterAll(async () => {
  await agent.stop();
  await secured.stop();
});

const api = () => request(agent.url);

async function walk(path: string): Promise<{ pages: number[]; ids: string[]; totals: number[] }> {
  const pages: number[] = [];
  const ids: string[] = [];
  const totals: number[] = [];
  let url = path;
  for (;;) {
    const { body } = await api().get(url).expect(200);
    pages.push(body.data.length);
    totals.push(body.meta.total);
    ids.push(...body.data.map((x: { id: string }) => x.id));
    expect(body.meta.hasMore).toBe(body.meta.nextCursor !== "");
    if (!body.meta.hasMore) return { pages, ids, totals };
    url = `${path}${path.includes("?") ? "&" : "?"}cursor=${encodeURIComponent(body.meta.nextCursor)}`;
  }
}

describe("GET /schedules", () => {
  it("pages newest first, 20 by default, with the total", async () => {
    const { pages, ids, totals } = await walk("/schedules");
    expect(pages).toEqual([20, 6]);
    expect(totals).toEqual([26, 26]);
    expect(ids[0]).toBe("one-off");
    expect(ids.at(-1)).toBe("s00");
    expect(new Set(ids).size).toBe(26);
  });

  it("sorts oldest first on request, filters by type (other values ignored)", async () => {
    expect((await walk("/schedules?sort=createdAt:asc&limit=7")).ids.slice(0, 2)).toEqual(["s00", "s01"]);
    expect((await api().get("/schedules?type=at").expect(200)).body).toMatchObject({
      data: [{ id: "one-off" }],
      meta: { total: 1, hasMore: false, nextCursor: "" },
    });
    expect((await api().get("/schedules?type=sleep&limit=1").expect(200)).body.meta.total).toBe(26);
  });

  it.each(["0", "101", "abc", "-1"])("rejects limit=%s", async (limit) => {
    expect((await api().get(`/schedules?limit=${limit}`).expect(400)).body.error).toMatch(/query\.limit: must be an integer between 1 and 100/);
  });

  it("rejects a tampered cursor and a cursor from another query", async () => {
    const { body } = await api().get("/schedules?limit=5").expect(200);
    expect((await api().get(`/schedules?limit=5&cursor=${body.meta.nextCursor}x`).expect(400)).body.error).toMatch(/cursor: invalid cursor/);
    expect((await api().get(`/schedules?sort=createdAt:asc&cursor=${body.meta.nextCursor}`).expect(400)).body.error).toMatch(/different query/);
  });
});

describe("executions", () => {
  it("GET /schedules/{id}/executions pages that schedule's history newest first", async () => {
    const { pages, ids, totals } = await walk("/schedules/s00/executions?limit=10");
    expect(pages).toEqual([10, 10, 5]);
    expect(totals[0]).toBe(25);
    expect(ids[0]).toBe("x24");
    await api().get("/schedules/ghost/executions").expect(404);
  });

  it("GET /schedule-executions is sandbox-wide and filters by scheduleId and status", async () => {
    const all = (await api().get("/schedule-executions?limit=100").expect(200)).body;
    expect(all.meta.total).toBe(28);
    expect(all.data[0]).toMatchObject({ id: "y2", scheduleId: "s01", sandbox: "lists" });
    const failed = (await api().get("/schedule-executions?status=failed&scheduleId=s00").expect(200)).body;
    expect(failed.data.map((e: { id: string }) => e.id)).toEqual(["x20", "x15", "x10", "x5", "x0"]);
    expect((await api().get("/schedule-executions?scheduleId=s01").expect(200)).body.meta.total).toBe(3);
    expect((await api().get("/schedule-executions?status=weird").expect(400)).body.error).toMatch(/query\.status/);
  });

  it("deleting a schedule deletes its history", async () => {
    await api().delete("/schedules/s01").expect(200);
    expect((await api().get("/schedule-executions?scheduleId=s01").expect(200)).body.meta.total).toBe(0);
  });
});

describe("secrets", () => {
  const body = { id: "sec", type: "cron", value: "0 3 * * *", input: { command: "true", env: { PASSWORD: "hunter2" } } };

  it("masks env everywhere; show_secrets=true reveals it only with the agent's token", async () => {
    const auth = { Authorization: `Bearer ${TOKEN}` };
    const s = request(secured.url);
    await s.post("/schedules").send(body).expect(401);
    expect((await s.post("/schedules").set(auth).send(body).expect(200)).body.input.env).toEqual({ PASSWORD: "***" });
    expect((await s.get("/schedules/sec").set(auth).expect(200)).body.input.env).toEqual({ PASSWORD: "***" });
    expect((await s.get("/schedules").set(auth).expect(200)).body.data[0].input.env).toEqual({ PASSWORD: "***" });
    expect((await s.get("/schedules/sec?show_secrets=true").set(auth).expect(200)).body.input.env).toEqual({ PASSWORD: "hunter2" });
    expect(
      (
        await s
          .get("/schedules?show_secrets=true")
          .set({ "X-Blaxel-Authorization": `Bearer ${TOKEN}` })
          .expect(200)
      ).body.data[0].input.env,
    ).toEqual({ PASSWORD: "hunter2" });
    await s.get("/schedules/sec?show_secrets=true").expect(401);
    expect((await s.delete("/schedules/sec").set(auth).expect(200)).body.input.env).toEqual({ PASSWORD: "***" });
  });

  it("refuses show_secrets=true on an agent without a token", async () => {
    await api().post("/schedules").send(body).expect(200);
    expect((await api().get("/schedules/sec").expect(200)).body.input.env).toEqual({ PASSWORD: "***" });
    expect((await api().get("/schedules/sec?show_secrets=true").expect(403)).body.error).toMatch(/requires the agent to run with --token/);
  });
});
