import { afterAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";

/**
 * Standby accrues no compute in the account metrics (the platform bills a sleeping sandbox for storage only):
 * the compute span closes when the sandbox sleeps and opens again when it wakes. The simulator clock is
 * frozen, so only test-hook advances count. (npm run build first: the agents run from dist/.)
 */
const KEY = "standby-usage-admin-key";
const HOUR = 3_600_000;
let sim: ServedSimulator | undefined;
afterAll(async () => {
  await sim?.stop();
});

async function call(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${sim!.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", "x-blaxel-workspace": "default" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function computeGbs(sandbox: string): Promise<number> {
  const q = new URLSearchParams({
    startTime: "2026-01-01T00:00:00Z",
    endTime: "2028-01-01T00:00:00Z",
    groupBy: "billing_dimension,resource_name",
    resolution: "monthly",
  });
  const body = (await (await call("GET", `/v0/accounts/local/metrics?${q}`)).json()) as {
    data: { billingDimension: string; resourceName: string; summary: { usage: number } }[];
  };
  return body.data.find((e) => e.billingDimension === "sandbox_compute_runtime_gbs" && e.resourceName === sandbox)?.summary.usage ?? 0;
}

describe.skipIf(isolationUnavailable !== undefined)("standby and usage", () => {
  it("an hour in standby adds no compute; running hours before and after do", async () => {
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent", standbyAfterMs: 0, warmSandboxes: 0 });
    expect((await call("POST", "/_sim/clock", { freeze: true })).status).toBe(200);
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "billed" }, spec: { runtime: { memory: 2048 } } })).status).toBe(200);
    await call("POST", "/_sim/clock", { advanceMs: HOUR });
    expect(await computeGbs("billed")).toBeCloseTo(7200, 6);
    expect((await call("POST", "/_sim/standby", { sandbox: "billed", state: "STANDBY" })).status).toBe(200);
    await call("POST", "/_sim/clock", { advanceMs: HOUR });
    expect(await computeGbs("billed")).toBeCloseTo(7200, 6);
    // The first request through its URL wakes it.
    expect((await call("GET", "/sbx/default/billed/process")).status).toBe(200);
    await call("POST", "/_sim/clock", { advanceMs: HOUR });
    expect(await computeGbs("billed")).toBeCloseTo(14400, 6);
  });
});
