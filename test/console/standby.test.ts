import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../simulator/serve.js";
import { chromiumMissing, launchChromium, type Browser } from "../../console/tools/browser.js";
import { buildConsole } from "../../console/tools/build.js";
import { apiCaller } from "../../console/tools/call.js";
import { consoleDistDir } from "../../src/package-paths.js";
import { isolationUnavailable } from "../helpers/sandbox-procs.js";

/**
 * A sandbox's page in Chromium shows its standby state and, with test hooks, puts it to sleep and wakes it
 * (a real sandbox under the default launcher; the Overview tab asks nothing of its agent, so it does not wake it).
 */
const ADMIN = "console-standby-admin-key";
const missing = chromiumMissing() ?? isolationUnavailable;

describe.skipIf(missing !== undefined)(`console: standby${missing ? ` (skipped: ${missing})` : ""}`, () => {
  let sim: ServedSimulator;
  let browser: Browser;
  const api = apiCaller(() => sim.url, ADMIN);

  beforeAll(async () => {
    if (!existsSync(join(consoleDistDir(), "index.html"))) await buildConsole();
    sim = await serveSimulator({ port: 0, apiKey: ADMIN, testHooks: true, logLevel: "warn", imageSource: "host", standbyAfterMs: 0, warmSandboxes: 0 });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sim?.stop();
  }, 60_000);

  it("shows RUNNING, the Standby button puts the sandbox to sleep (STANDBY shown), Wake brings it back", async () => {
    await api("POST", "/v0/sandboxes", { metadata: { name: "sleepy" } });
    const page = await browser.context.newPage();
    await page.goto(`${sim.url}/console#/w/default/sandboxes/sleepy/overview`);
    await page.getByRole("textbox", { name: "API key" }).fill(ADMIN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("dd", { hasText: "RUNNING" }).waitFor();
    await page.getByRole("button", { name: "Standby", exact: true }).click();
    await page.locator("dd", { hasText: "STANDBY" }).waitFor();
    expect(sim.agents.standbyState("default", "sleepy")).toBe("STANDBY");
    await page.getByRole("button", { name: "Wake", exact: true }).click();
    await page.locator("dd", { hasText: "RUNNING" }).waitFor();
    expect(sim.agents.standbyState("default", "sleepy")).toBe("RUNNING");
    await page.close();
  });
});
