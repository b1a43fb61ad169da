import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, serveTestSim } from "../helpers/simulator.js";

/**
 * The unmodified @blaxel/core SDK against a started simulator, configured the
 * way a user would (control-plane.md §1.6). The SDK reads its settings on
 * first use, so the environment is set before it is imported.
 */
type Sdk = typeof import("@blaxel/core");
let sim: Awaited<ReturnType<typeof serveTestSim>>;
let sdk: Sdk;

// process.env outlives this file in a reused worker: put it back afterwards.
const savedEnv = { ...process.env };

beforeAll(async () => {
  sim = await serveTestSim({ workspace: "sdk-ws" });
  process.env.BL_API_URL = `${sim.url}/v0`;
  process.env.BL_RUN_URL = sim.url;
  process.env.BL_WORKSPACE = "sdk-ws";
  process.env.BL_API_KEY = ADMIN_KEY;
  process.env.BL_DISABLE_H2 = "true";
  process.env.BL_REGION = "us-pdx-1";
  delete process.env.BL_CLIENT_CREDENTIALS;
  delete process.env.BL_API_VERSION;
  await request(sim.serving.server).post("/_sim/transitions").send({ mode: "immediate" }).expect(200);
  sdk = await import("@blaxel/core");
});
afterAll(async () => {
  await sim?.close();
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
});

describe("@blaxel/core against sandbox-sim", () => {
  it("creates a sandbox (DEPLOYED, named), lists it, 404s on a missing one", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "demo", image: "blaxel/base-image:latest", memory: 4096 });
    expect(sandbox.metadata.name).toBe("demo");
    expect(sandbox.status).toBe("DEPLOYED");
    const unnamed = await sdk.SandboxInstance.create({});
    expect(unnamed.metadata.name).toMatch(/^sandbox-/);
    const page = await sdk.SandboxInstance.list();
    const all = await page.autoPagingToArray({ limit: 100 });
    expect(all.map((s) => s.metadata.name).sort()).toEqual(["demo", unnamed.metadata.name].sort());
    await expect(sdk.SandboxInstance.get("missing")).rejects.toMatchObject({ code: 404 });
  });

  it("createIfNotExists returns the existing sandbox", async () => {
    const again = await sdk.SandboxInstance.createIfNotExists({ name: "demo" });
    expect(again.metadata.name).toBe("demo");
  });

  it("schedules: sleep comes back as at, list pages with cursors", async () => {
    const sandbox = await sdk.SandboxInstance.get("demo");
    const entry = await sandbox.schedules.create({ type: "sleep", value: "1h", input: { command: "echo hi" } });
    expect(entry.type).toBe("at");
    expect(entry.maxExecutions).toBe(100);
    for (let i = 0; i < 3; i++) await sandbox.schedules.create({ type: "cron", value: `${i} * * * *`, input: { command: "date" } });
    const first = await sandbox.schedules.list({ limit: 1 });
    const every = await first.autoPagingToArray({ limit: 10 });
    expect(every).toHaveLength(4);
  });

  it("volumes and drives through their SDK wrappers, including createIfNotExists", async () => {
    const volume = await sdk.VolumeInstance.create({ name: "vol1", size: 1024 });
    expect(volume.metadata.name).toBe("vol1");
    const same = await sdk.VolumeInstance.createIfNotExists({ name: "vol1", size: 1024 });
    expect(same.metadata.name).toBe("vol1");
    const drive = await sdk.DriveInstance.create({ name: "drive1" });
    expect(drive.metadata.name).toBe("drive1");
  });

  it("jobs: run an execution to success, and the generated client for agents", async () => {
    await sdk.createJob({ body: { metadata: { name: "batch" }, spec: { runtime: { image: "batch:1" } } }, throwOnError: true });
    const job = sdk.blJob("batch");
    const id = await job.createExecution({ tasks: [{ durationMs: 100 }] });
    let status = "";
    for (let i = 0; i < 40 && status !== "succeeded"; i++) {
      status = (await job.getExecution(id)).status ?? "";
      if (status !== "succeeded") await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe("succeeded");
    const { data } = await sdk.listAgents({ throwOnError: true });
    expect(data).toMatchObject({ data: [], meta: { hasMore: false } });
  });

  it("client credentials: a service account's token (a JWT) is fetched once and reused", async () => {
    const { data: sa } = await sdk.createWorkspaceServiceAccount({ body: { name: "ci" }, throwOnError: true });
    sdk.initialize({ workspace: "sdk-ws", clientCredentials: { clientId: sa.client_id!, clientSecret: (sa as { client_secret: string }).client_secret } });
    const sandbox = await sdk.SandboxInstance.get("demo");
    expect(sandbox.metadata.name).toBe("demo");
    const list = await sdk.SandboxInstance.list();
    expect(list.data.length).toBeGreaterThan(0);
  });
});
