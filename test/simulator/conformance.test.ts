import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeZodError } from "../../src/http.js";
import { ADMIN_KEY, serveTestSim } from "../helpers/simulator.js";
import { sdkOperationNames } from "../helpers/sdk-operations.js";
import { CASES } from "./conformance/cases.js";

/**
 * Calls every generated control-plane function of @blaxel/core (sdk.gen)
 * against a started simulator, through the SDK's own client and headers, and
 * checks each answer's status and body against the SDK's types.
 */
type SdkFn = (options: Record<string, unknown>) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
let sim: Awaited<ReturnType<typeof serveTestSim>>;
let sdk: Record<string, SdkFn>;

// process.env outlives this file in a reused worker: put it back afterwards.
const savedEnv = { ...process.env };

beforeAll(async () => {
  sim = await serveTestSim({ workspace: "conf" });
  Object.assign(process.env, {
    BL_API_URL: `${sim.url}/v0`,
    BL_RUN_URL: sim.url,
    BL_WORKSPACE: "conf",
    BL_API_KEY: ADMIN_KEY,
    BL_DISABLE_H2: "true",
    BL_REGION: "us-pdx-1",
  });
  delete process.env.BL_CLIENT_CREDENTIALS;
  delete process.env.BL_API_VERSION;
  await request(sim.serving.server)
    .post("/_sim/seed")
    .send({
      accounts: [{ id: "c-other" }],
      workspaces: [{ name: "c-partner", accountId: "c-other" }],
      // The default admin also administers the partner workspace, so it may accept the cross-account share.
      users: [
        { email: "admin@local.test", accountId: "local", role: "admin", workspaces: ["c-partner"] },
        { email: "peer@local.test", accountId: "local" },
      ],
    })
    .expect(200);
  await request(sim.serving.server).post("/_sim/transitions").send({ mode: "immediate" }).expect(200);
  sdk = (await import("@blaxel/core")) as unknown as Record<string, SdkFn>;
});
afterAll(async () => {
  await sim?.close();
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
});

describe("conformance with @blaxel/core's generated client", () => {
  it("every sdk.gen operation answers with the declared status and shape", async () => {
    const operations = sdkOperationNames();
    const failures = new Map<string, string>();
    const ids: Record<string, string> = {};
    for (const testCase of CASES) {
      const fn = sdk[testCase.op];
      if (!fn) {
        failures.set(testCase.op, "not exported by @blaxel/core");
        continue;
      }
      const { data, error, response } = await fn(testCase.options(ids));
      const expected = testCase.status ?? 200;
      if (response.status !== expected) {
        failures.set(testCase.op, `status ${response.status} (expected ${expected}): ${JSON.stringify(error ?? data)}`);
        continue;
      }
      if (!/application\/json/.test(response.headers.get("content-type") ?? "")) failures.set(testCase.op, "no application/json content type");
      const parsed = testCase.schema.safeParse(expected === 204 ? undefined : (data ?? error));
      if (!parsed.success) failures.set(testCase.op, describeZodError(parsed.error, "response"));
      else testCase.save?.(data, ids);
    }
    const covered = new Set(CASES.map((c) => c.op));
    const conform = operations.filter((op) => covered.has(op) && !failures.has(op));
    process.stdout.write(`${conform.length}/${operations.length} operations conform\n`);
    for (const [op, why] of failures) process.stdout.write(`  ${op}: ${why}\n`);
    for (const op of operations.filter((o) => !covered.has(o))) process.stdout.write(`  ${op}: no conformance case\n`);
    expect([...failures.keys()]).toEqual([]);
    expect(conform.length).toBe(operations.length);
  });
});
