import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { serveSimulator } from "../../simulator/serve.js";
import { chromiumMissing, launchChromium } from "./browser.js";
import { apiCaller } from "./call.js";
import { packageRoot } from "../../src/package-paths.js";

/**
 * `npm run console:screenshots`: starts a simulator (process launcher, test
 * hooks), fills it with a little of everything through its public API, and
 * writes a PNG of each main console page to docs/console/ (README shows them).
 */
const KEY = "console-screenshots-key";

/** Usage over the last 30 days in three dimensions and two workspaces, so the chart has layers. */
function usageEvents(): unknown[] {
  const events: unknown[] = [];
  const day = 86_400_000;
  const today = Math.floor(Date.now() / day) * day;
  for (let d = 29; d >= 0; d--) {
    const t = new Date(today - d * day + 10 * 3_600_000).toISOString();
    const wave = 1 + Math.sin(d / 4);
    events.push({
      timestamp: t,
      workspace: "default",
      resourceType: "sandbox",
      resourceName: "build-box",
      resourceUuid: "u-build-box",
      billingDimension: "sandbox_compute_runtime_gbs",
      usage: Math.round(40_000 * wave + 20_000),
    });
    events.push({
      timestamp: t,
      workspace: "staging",
      resourceType: "agent",
      resourceName: "helper",
      resourceUuid: "u-helper",
      billingDimension: "agent_compute_runtime_gbs",
      usage: Math.round(25_000 * (2 - wave) + 5_000),
    });
    events.push({
      timestamp: t,
      workspace: "default",
      resourceType: "volume",
      resourceName: "data",
      resourceUuid: "u-data",
      billingDimension: "volume_storage_gbs",
      usage: 86_400 * 10,
    });
  }
  return events;
}

async function seed(base: string): Promise<void> {
  const call = (method: string, path: string, body?: unknown) => apiCaller(() => base, KEY)(method, path, body);
  await call("POST", "/_sim/seed", { workspaces: [{ name: "staging", accountId: "local" }] });
  await call("POST", "/v0/sandboxes", { metadata: { name: "demo" }, spec: { runtime: { image: "blaxel/base-image:latest", memory: 2048, ttl: "2h" } } });
  await call("POST", "/v0/sandboxes", { metadata: { name: "build-box" }, spec: { runtime: { image: "blaxel/node:22", memory: 4096 } } });
  await call("POST", "/v0/sandboxes", { metadata: { name: "scratch" }, spec: { runtime: { image: "blaxel/py-app:latest", memory: 1024, ttl: "15m" } } });
  const sbx = "/sbx/default/demo";
  await call("PUT", `${sbx}/filesystem/app`, { isDirectory: true });
  await call("PUT", `${sbx}/filesystem/app/README.md`, { content: "# demo\n\nFiles written through the sandbox URL.\n" });
  await call("PUT", `${sbx}/filesystem/app/server.js`, { content: "require('http').createServer((q, s) => s.end('hi')).listen(3000);\n" });
  await call("PUT", `${sbx}/filesystem/notes.txt`, { content: "hello from the console\n".repeat(40) });
  await call("POST", `${sbx}/process`, { command: "for i in 1 2 3; do echo step $i; sleep 0.2; done; echo done >&2", name: "steps", waitForCompletion: true });
  await call("POST", `${sbx}/process`, { command: "sleep 600", name: "server" });
  const nightly = (await call("POST", "/v0/sandboxes/demo/schedules", { type: "cron", value: "0 3 * * *", input: { command: "echo nightly backup" } })) as {
    id: string;
  };
  await call("POST", `${sbx}/schedules/${nightly.id}/run`);
  await call("POST", "/v0/sandboxes/demo/schedules", { type: "sleep", value: "1s", input: { command: "exit 3" } });
  await call("POST", "/v0/sandboxes/demo/previews", { metadata: { name: "web" }, spec: { port: 3000, public: true } });
  await call("POST", "/v0/jobs", { metadata: { name: "etl" }, spec: { runtime: { image: "blaxel/job:latest", memory: 2048 } } });
  await call("POST", "/v0/jobs/etl/executions", { tasks: [{ duration: "1s" }, { duration: "2s" }, { fail: true }] });
  await call("POST", "/v0/volumes", { metadata: { name: "data" }, spec: { size: 10240 } });
  await call("POST", "/v0/drives", { metadata: { name: "team" }, spec: {} });
  const sa = (await call("POST", "/v0/service_accounts", { name: "ci", description: "GitHub Actions" })) as { client_id: string };
  await call("POST", `/v0/service_accounts/${sa.client_id}/api_keys`, { name: "deploy", expires_in: "30d" });
  await call("PUT", "/_sim/faults", { rules: [{ method: "POST", path: "/v0/agents", status: 503, times: 2 }] });
  await call("POST", "/_sim/usage-events", usageEvents());
  await new Promise((r) => setTimeout(r, 2500)); // the sleep schedule fires
}

async function shoot(page: Page, dir: string, name: string, hash: string, ready: string): Promise<void> {
  await page.evaluate((h) => (location.hash = h), hash);
  await page.locator(ready).first().waitFor({ state: "visible", timeout: 15_000 });
  await page.waitForTimeout(600); // let polled panels and the chart settle
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: false });
  process.stdout.write(`docs/console/${name}.png\n`);
}

async function main(): Promise<void> {
  const missing = chromiumMissing();
  if (missing) throw new Error(missing);
  const dir = join(packageRoot(), "docs", "console");
  mkdirSync(dir, { recursive: true });
  const sim = await serveSimulator({ port: 0, apiKey: KEY, testHooks: true, logLevel: "warn" }, { launcher: "process" });
  const browser = await launchChromium();
  try {
    await seed(sim.url);
    const page = await browser.context.newPage();
    await page.goto(`${sim.url}/console`);
    await page.getByRole("textbox", { name: "API key" }).fill(KEY);
    await page.screenshot({ path: join(dir, "sign-in.png") });
    process.stdout.write("docs/console/sign-in.png\n");
    await page.getByRole("button", { name: "Sign in" }).click();
    await shoot(page, dir, "workspaces", "#/workspaces", ".card");
    await shoot(page, dir, "sandboxes", "#/w/default/sandboxes", "tr[data-row=demo]");
    await shoot(page, dir, "sandbox-overview", "#/w/default/sandboxes/demo/overview", ".events li");
    await shoot(page, dir, "sandbox-files", "#/w/default/sandboxes/demo/files", "tr[data-file=notes\\.txt]");
    await page.getByRole("button", { name: "notes.txt" }).click();
    await page.locator(".viewer").waitFor();
    await page.screenshot({ path: join(dir, "sandbox-files.png") });
    await shoot(page, dir, "sandbox-processes", "#/w/default/sandboxes/demo/processes", ".procs li");
    await page.locator(".procs li", { hasText: "steps" }).getByRole("button").click();
    await page.locator(".logs", { hasText: "step 3" }).waitFor();
    await page.screenshot({ path: join(dir, "sandbox-processes.png") });
    await shoot(page, dir, "sandbox-terminal", "#/w/default/sandboxes/demo/terminal", ".terminal-state[data-state=connected]");
    await page.locator(".terminal-host").click();
    // Each line once the one before has answered: keys typed ahead would be echoed into the previous output.
    const lines: [string, string | RegExp][] = [
      ["ls -l app", /server\.js\s*$/],
      ["printf '\\033[1;32mgreen\\033[0m \\033[38;2;255;136;0morange\\033[0m\\n'", /^green orange\s*$/],
      ["stty size", /^\d+ \d+\s*$/],
    ];
    for (const [line, answer] of lines) {
      await page.keyboard.type(line);
      await page.keyboard.press("Enter");
      await page.locator(".xterm-rows > div", { hasText: answer }).first().waitFor();
    }
    await page.waitForTimeout(400);
    await page.screenshot({ path: join(dir, "sandbox-terminal.png") });
    await shoot(page, dir, "sandbox-schedules", "#/w/default/sandboxes/demo/schedules", ".timeline li");
    await shoot(page, dir, "job", "#/w/default/jobs/etl", "tr[data-row]");
    await page.locator("tr[data-row] button.linkish").first().click();
    await page.locator(".tasks li").first().waitFor();
    await page.screenshot({ path: join(dir, "job.png") });
    await shoot(page, dir, "service-accounts", "#/w/default/service_accounts", ".panel-head h2");
    await page.getByRole("button", { name: "API keys" }).click();
    await page.getByLabel("Key name").fill("laptop");
    await page.getByRole("button", { name: "New API key" }).click();
    await page.locator("[data-secret]").waitFor();
    await page.locator(".subpanel li", { hasText: "laptop" }).waitFor();
    await page.screenshot({ path: join(dir, "service-accounts.png") });
    await shoot(page, dir, "metrics", "#/metrics", ".chart canvas");
    await shoot(page, dir, "test-hooks", "#/hooks", "[data-clock]");
    await page.setViewportSize({ width: 420, height: 860 });
    await shoot(page, dir, "narrow-sandbox", "#/w/default/sandboxes/demo/processes", ".procs li");
  } finally {
    await browser.close();
    await sim.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`console:screenshots: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
