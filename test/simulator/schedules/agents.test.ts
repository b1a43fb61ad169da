import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * The control plane's schedule endpoints over real sandbox-agents: the agent
 * keeps and executes the schedules, the simulator forwards, maps and merges.
 * (npm run build first: the agents run from dist/.)
 */
const KEY = "schedules-agents-admin-key";
let sim: ServedSimulator;

/** Polls an async check (a real agent executes on real time); at most `ms`. */
async function eventually(check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(100);
  }
}

async function call(method: string, path: string, body?: unknown, version = "2026-04-28"): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${KEY}`,
      "x-blaxel-workspace": "default",
      "blaxel-version": version,
      ...(body ? { "content-type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, logLevel: "silent" });
  for (const name of ["alpha", "beta"]) expect((await call("POST", "/v0/sandboxes", { metadata: { name } })).status).toBe(200);
});
afterAll(async () => {
  await sim?.stop();
});

describe("schedules delegated to the sandboxes' agents", () => {
  let sleepId = "";

  it("creates on the agent: sleep resolved to at, env masked unless an admin asks", async () => {
    const created = await call("POST", "/v0/sandboxes/alpha/schedules", {
      type: "sleep",
      value: "1s",
      input: { command: "echo ran > ran.txt", env: { TOKEN: "s3cret" } },
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ sandbox: "alpha", type: "at", maxExecutions: 100, input: { command: "echo ran > ran.txt", env: { TOKEN: "***" } } });
    sleepId = created.body.id;
    expect((await call("GET", `/v0/sandboxes/alpha/schedules/${sleepId}`)).body.input.env.TOKEN).toBe("***");
    expect((await call("GET", `/v0/sandboxes/alpha/schedules/${sleepId}?show_secrets=true`)).body.input.env.TOKEN).toBe("s3cret");
    const cron = await call("POST", "/v0/sandboxes/beta/schedules", { id: "nightly", type: "cron", value: "0 3 * * *", input: { command: "true" } });
    expect(cron.status).toBe(200);
    // The agent's own validation and conflicts come back with their status.
    expect((await call("POST", "/v0/sandboxes/beta/schedules", { id: "nightly", type: "cron", value: "0 3 * * *", input: { command: "true" } })).status).toBe(
      409,
    );
    const bad = await call("POST", "/v0/sandboxes/beta/schedules", { type: "cron", value: "not cron", input: { command: "true" } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/value/);
    expect((await call("POST", "/v0/sandboxes/beta/schedules", { type: "cron", value: "0 3 * * *" })).body.message).toMatch(/input\.command/);
    expect((await call("GET", "/v0/sandboxes/beta/schedules/ghost")).status).toBe(404);
  });

  it("the agent executes it: the command ran in the sandbox and the execution is listed per sandbox and across sandboxes", async () => {
    let execution: any;
    await eventually(async () => {
      const page = await call("GET", "/v0/sandboxes/alpha/schedule-executions");
      execution = page.body.data.find((e: { scheduleId: string }) => e.scheduleId === sleepId);
      return execution?.runStatus === "succeeded";
    }, 15_000);
    expect(execution).toMatchObject({ sandbox: "alpha", status: "succeeded", statusCode: 200, error: "", exitCode: 0 });
    expect(typeof execution.executedAt).toBe("string");
    const file = await fetch(`${sim.url}/sbx/default/alpha/filesystem/ran.txt`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(((await file.json()) as { content: string }).content).toBe("ran\n");
    const all = await call("GET", "/v0/schedule-executions");
    expect(all.body.data.map((e: { id: string }) => e.id)).toContain(execution.id);
    expect((await call("GET", "/v0/schedule-executions?status=failed")).body.data).toEqual([]);
    // A one-off that fired is deleted, as on the platform; its execution stays (counted in the metrics).
    expect((await call("GET", `/v0/sandboxes/alpha/schedules/${sleepId}`)).status).toBe(404);
    const metrics = await call("GET", "/v0/schedules/metrics");
    expect(metrics.body).toMatchObject({ sandboxes: 1, schedules: 1, executions: 1, executionsByStatus: { succeeded: 1, failed: 0 } });
  });

  it("cross-sandbox lists merge the agents' pages behind one cursor", async () => {
    expect((await call("POST", "/v0/sandboxes/alpha/schedules", { id: "hourly", type: "cron", value: "0 * * * *", input: { command: "true" } })).status).toBe(
      200,
    );
    const all = await call("GET", "/v0/schedules");
    expect(all.body.data.map((s: { sandbox: string }) => s.sandbox).sort()).toEqual(["alpha", "beta"]);
    expect(all.body.meta.total).toBe(2);
    const first = await call("GET", "/v0/schedules?limit=1");
    expect(first.body.meta.hasMore).toBe(true);
    const second = await call("GET", `/v0/schedules?limit=1&cursor=${encodeURIComponent(first.body.meta.nextCursor)}`);
    expect(second.body.meta).toMatchObject({ hasMore: false, nextCursor: "" });
    expect([first.body.data[0].id, second.body.data[0].id].sort()).toEqual(["hourly", "nightly"]);
    expect((await call("GET", "/v0/schedules?sandbox=beta")).body.data.map((s: { id: string }) => s.id)).toEqual(["nightly"]);
    expect((await call("GET", "/v0/schedules?sandbox=ghost")).body).toMatchObject({ data: [], meta: { total: 0 } });
    // Before 2026-04-28 a sandbox's list is a bare array of everything.
    const bare = await call("GET", "/v0/sandboxes/beta/schedules", undefined, "2026-04-16");
    expect(bare.body.map((s: { id: string }) => s.id)).toEqual(["nightly"]);
    expect((await call("GET", `/v0/schedules?limit=1&type=cron&cursor=${encodeURIComponent(first.body.meta.nextCursor)}`)).status).toBe(400);
  });

  it("updates and deletes on the agent", async () => {
    const updated = await call("PUT", "/v0/sandboxes/beta/schedules/nightly", { type: "cron", value: "30 4 * * *", input: { command: "true" } });
    expect(updated.body).toMatchObject({ id: "nightly", value: "30 4 * * *" });
    expect((await call("DELETE", "/v0/sandboxes/beta/schedules/nightly")).body).toMatchObject({ id: "nightly" });
    expect((await call("GET", "/v0/sandboxes/beta/schedules")).body.data).toEqual([]);
  });

  it("an agent that is down: 503 {error, code, message} naming the sandbox, per sandbox and across sandboxes", async () => {
    await sim.agents.stop("default", "beta");
    const one = await call("GET", "/v0/sandboxes/beta/schedules");
    expect(one.status).toBe(503);
    expect(one.body).toMatchObject({ error: "service_unavailable", code: 503 });
    expect(one.body.message).toContain('sandbox "beta"');
    const all = await call("GET", "/v0/schedules");
    expect(all.status).toBe(503);
    expect(all.body.message).toContain('sandbox "beta"');
    // The other sandbox still answers on its own.
    expect((await call("GET", "/v0/sandboxes/alpha/schedules")).status).toBe(200);
  });
});
