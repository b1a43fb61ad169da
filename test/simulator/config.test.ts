import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { createSimulatorApp } from "../../simulator/app.js";
import { ConfigError, parseSimConfig } from "../../simulator/config.js";
import { openSimulator } from "../../simulator/root.js";
import { dotenvLines, exportLines, sdkEnv } from "../../simulator/env-lines.js";

const dir = mkdtempSync(join(tmpdir(), "sim-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("sandbox-sim configuration", () => {
  it("defaults to port 8081, in-memory state, workspace default, no test hooks", () => {
    const config = parseSimConfig([], {});
    expect(config).toMatchObject({ port: 8081, host: "127.0.0.1", data: ":memory:", workspace: "default", testHooks: false });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("builds the SDK's default image at start unless told otherwise (--prebuild, SANDBOX_SIM_PREBUILD); programmatic use builds nothing ahead", async () => {
    expect(parseSimConfig([], {})).toMatchObject({ prebuild: "blaxel/base-image:latest" });
    expect(parseSimConfig(["--prebuild", "none"], {})).toMatchObject({ prebuild: "none" });
    expect(parseSimConfig([], { SANDBOX_SIM_PREBUILD: "blaxel/nextjs" })).toMatchObject({ prebuild: "blaxel/nextjs" });
    const { SimConfigSchema } = await import("../../simulator/config.js");
    expect(SimConfigSchema.parse({}).prebuild).toBe("none");
  });

  it("reads options, then environment fallbacks", () => {
    const config = parseSimConfig(["--port", "0", "--test-hooks", "--workspace", "team"], {
      SANDBOX_SIM_API_KEY: "from-env-key-1",
      SANDBOX_SIM_DATA: join(dir, "x.db"),
    });
    expect(config).toMatchObject({ port: 0, testHooks: true, workspace: "team", apiKey: "from-env-key-1", data: join(dir, "x.db") });
  });

  it("rejects bad values naming the option", () => {
    expect(() => parseSimConfig(["--port", "70000"], {})).toThrow(ConfigError);
    expect(() => parseSimConfig(["--workspace", "Bad_Name"], {})).toThrow(/--workspace/);
    expect(() => parseSimConfig(["--api-key", "short"], {})).toThrow(/--api-key/);
    expect(() => parseSimConfig(["--bogus"], {})).toThrow(ConfigError);
  });

  it("prints the env lines that point the SDK at the simulator", () => {
    const runtime = openSimulator({ apiKey: "printed-key-01" });
    try {
      const env = sdkEnv(runtime.deps, "http://127.0.0.1:9999");
      expect(exportLines(env).split("\n")).toEqual([
        "export BL_API_URL=http://127.0.0.1:9999/v0",
        "export BL_RUN_URL=http://127.0.0.1:9999",
        "export BL_WORKSPACE=default",
        "export BL_API_KEY=printed-key-01",
        "export BL_REGION=us-pdx-1",
        "export BL_DISABLE_H2=true",
      ]);
      expect(dotenvLines(env)).toBe(
        Object.entries(env)
          .map(([k, v]) => `${k}=${v}\n`)
          .join(""),
      );
      expect(exportLines({ ODD: "it's a $value" })).toBe("export ODD='it'\\''s a $value'");
    } finally {
      runtime.close();
    }
  });

  it("keeps one generated admin key per --data file: a restart prints the same key", () => {
    const data = join(dir, "one-key.db");
    const first = openSimulator({ data });
    const key = first.deps.adminApiKey;
    first.close();
    const second = openSimulator({ data });
    try {
      expect(second.deps.adminApiKey).toBe(key);
      expect(second.deps.credentials.apiKeyBySecret(key)).toBeTruthy();
    } finally {
      second.close();
    }
    const given = openSimulator({ data, apiKey: "given-key-123" });
    try {
      expect(given.deps.adminApiKey).toBe("given-key-123");
    } finally {
      given.close();
    }
  });

  it("keeps state in the --data file across restarts, and applies a --seed file", async () => {
    const data = join(dir, "state.db");
    const seed = join(dir, "seed.json");
    writeFileSync(
      seed,
      JSON.stringify({
        accounts: [{ id: "acme" }],
        workspaces: [{ name: "acme-prod", accountId: "acme" }],
        users: [{ email: "ops@acme.test", accountId: "acme", role: "admin", workspaces: ["acme-prod"], apiKey: "acme-seed-key" }],
      }),
    );
    const first = openSimulator({ apiKey: "persist-key-01", data, seed });
    await request(createSimulatorApp(first.deps))
      .post("/v0/sandboxes")
      .set("Authorization", "Bearer persist-key-01")
      .send({ metadata: { name: "kept" } })
      .expect(200);
    await request(createSimulatorApp(first.deps))
      .get("/v0/sandboxes")
      .set("Authorization", "Bearer acme-seed-key")
      .set("X-Blaxel-Workspace", "acme-prod")
      .expect(200);
    first.close();
    const second = openSimulator({ apiKey: "persist-key-01", data });
    try {
      const res = await request(createSimulatorApp(second.deps)).get("/v0/sandboxes/kept").set("Authorization", "Bearer persist-key-01").expect(200);
      expect(res.body.status).toBe("DEPLOYED");
      await request(createSimulatorApp(second.deps))
        .get("/v0/sandboxes")
        .set("Authorization", "Bearer acme-seed-key")
        .set("X-Blaxel-Workspace", "acme-prod")
        .expect(200);
    } finally {
      second.close();
    }
  });
});
