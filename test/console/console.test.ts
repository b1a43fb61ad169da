import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../simulator/serve.js";
import { chromiumMissing, launchChromium, type Browser } from "../../console/tools/browser.js";
import { buildConsole } from "../../console/tools/build.js";
import { apiCaller } from "../../console/tools/call.js";
import { consoleDistDir } from "../../src/package-paths.js";
import { trackedTempDir } from "../helpers/temp-dirs.js";

/**
 * The web console in Debian's Chromium (playwright-core): one browser and one
 * simulator (process launcher, test hooks) for the file, a fresh tab per test.
 * Everything is waited for through the page, never timed.
 */
const ADMIN = "console-test-admin-key";
const ACME_ADMIN = "acme-admin-key-0001";
const MEMBER = "acme-member-key-0001";
const missing = chromiumMissing();
if (missing) console.warn(`console browser tests skipped: ${missing}`);

describe.skipIf(missing !== undefined)("web console in Chromium", () => {
  let sim: ServedSimulator;
  let browser: Browser;
  const problems: string[] = [];

  const api = apiCaller(() => sim.url, ADMIN);

  /** A new tab signed in with `key`; CSP violations and page errors are collected and fail the file. */
  async function signedIn(key: string, hash = "#/workspaces"): Promise<Page> {
    const page = await browser.context.newPage();
    page.on("console", (m) => {
      if (/Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text());
    });
    page.on("pageerror", (err) => problems.push(err.message));
    await page.goto(`${sim.url}/console${hash}`);
    await page.getByRole("textbox", { name: "API key" }).fill(key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    return page;
  }

  beforeAll(async () => {
    if (!existsSync(join(consoleDistDir(), "index.html"))) await buildConsole();
    sim = await serveSimulator({ port: 0, apiKey: ADMIN, testHooks: true, logLevel: "warn" }, { launcher: "process" });
    await api("POST", "/_sim/seed", {
      accounts: [{ id: "acme", name: "Acme" }],
      workspaces: [
        { name: "acme-prod", accountId: "acme" },
        { name: "acme-dev", accountId: "acme" },
      ],
      users: [
        { email: "boss@acme.test", accountId: "acme", role: "admin", apiKey: ACME_ADMIN },
        { email: "dev@acme.test", accountId: "acme", role: "member", workspaces: ["acme-prod"], apiKey: MEMBER },
      ],
    });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await sim?.stop();
    expect(problems).toEqual([]);
  }, 60_000);

  it("serves the page no-cache and the hashed assets immutable, under a strict CSP", async () => {
    const page = await fetch(`${sim.url}/console`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("cache-control")).toBe("no-cache");
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    const html = await page.text();
    expect(html).not.toMatch(/<script>|<style|style=/);
    const again = await fetch(`${sim.url}/console/`, { headers: { "If-None-Match": page.headers.get("etag")! } });
    expect(again.status).toBe(304);
    const script = /src="(\/console\/assets\/app-\w+\.js)"/.exec(html)![1]!;
    const asset = await fetch(sim.url + script);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-type")).toMatch(/^text\/javascript/);
    const unknown = await fetch(`${sim.url}/console/assets/../../package.json`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: "not_found", code: 404 });
  });

  it("refuses a wrong key with the API's own error, then signs in with a service account's client credentials", async () => {
    const page = await browser.context.newPage();
    await page.goto(`${sim.url}/console`);
    await page.getByRole("textbox", { name: "API key" }).fill("not-a-key-at-all");
    await page.getByRole("textbox", { name: "API key" }).press("Enter"); // the keyboard submits

    await expect.poll(() => page.getByRole("alert").textContent()).toBe("401 unauthorized invalid API key");
    const sa = await api("POST", "/v0/service_accounts", { name: "console-ci" });
    await page.getByRole("radio", { name: /client credentials/ }).check();
    await page.getByRole("textbox", { name: "Client ID" }).fill(sa.client_id);
    await page.getByLabel("Client secret").fill(sa.client_secret);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator(".card h2", { hasText: "default" }).waitFor();
    expect(await page.locator(".ws-pick option").allTextContents()).toEqual(["default"]);
    expect(page.url()).not.toContain(sa.client_secret);
    // Kept for this tab only, never in the URL.
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual(["sandbox-sim-console.credential"]);
    await page.close();
  });

  it("shows a new service account's secret and API key once; the key then signs in", async () => {
    const page = await signedIn(ADMIN, "#/w/default/service_accounts");
    await page.getByLabel("Name").fill("console-made");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    const secret = await page.locator("[data-secret]").textContent();
    expect(secret).toMatch(/^\S{20,}$/);
    await page.getByRole("button", { name: "I saved it" }).click();
    const panel = page.locator(".panel", { has: page.locator("h2", { hasText: "console-made" }) });
    await panel.getByRole("button", { name: "API keys" }).click();
    await panel.getByLabel("Key name").fill("from-the-console");
    await panel.getByRole("button", { name: "New API key" }).click();
    const key = (await page.locator("[data-secret]").textContent())!;
    expect(key).toMatch(/^sim_/);
    await panel.locator("li", { hasText: "from-the-console" }).waitFor();
    await page.getByRole("button", { name: "I saved it" }).click();
    expect(await page.content()).not.toContain(key);
    expect(await page.content()).not.toContain(secret!);
    await page.close();
    // The key works, for the service account's workspace only.
    const again = await signedIn(key);
    expect(await again.locator(".ws-pick option").allTextContents()).toEqual(["default"]);
    await again.close();
  });

  it("pages and sorts a list with the API's cursors, and shows a new item without a reload", async () => {
    for (let i = 1; i <= 23; i++) await api("POST", "/v0/volumes", { metadata: { name: `vol-${String(i).padStart(2, "0")}` }, spec: { size: 512 } });
    const page = await signedIn(ADMIN, "#/w/default/volumes");
    const names = () => page.locator("table[aria-label=Volumes] tbody tr[data-row]").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-row")));
    await page.locator("tr[data-row=vol-23]").waitFor();
    expect((await names())[0]).toBe("vol-23"); // newest first by default
    await page.getByRole("button", { name: "Name" }).click();
    await expect.poll(names).toEqual(Array.from({ length: 20 }, (_, i) => `vol-${String(i + 1).padStart(2, "0")}`));
    expect(await page.locator("th[aria-sort=ascending]").textContent()).toContain("Name");
    await page.getByRole("button", { name: "Next →" }).click();
    await expect.poll(names).toEqual(["vol-21", "vol-22", "vol-23"]);
    await page.getByRole("button", { name: "Name" }).click(); // descending, back to page 1
    await expect.poll(names).toEqual(Array.from({ length: 20 }, (_, i) => `vol-${String(23 - i).padStart(2, "0")}`));
    await page.getByRole("button", { name: "Next →" }).click();
    await expect.poll(names).toEqual(["vol-03", "vol-02", "vol-01"]);
    await page.getByRole("button", { name: "← Previous" }).click();
    await expect.poll(async () => (await names())[0]).toBe("vol-23");
    await api("POST", "/v0/volumes", { metadata: { name: "vol-zz" }, spec: { size: 512 } });
    await page.locator("tr[data-row=vol-zz]").waitFor(); // the next refresh brings it
    // A phone-wide window: nothing sticks out of the page (wide tables scroll inside their box).
    await page.setViewportSize({ width: 400, height: 800 });
    await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
    await page.close();
  });

  it("creates a sandbox, uploads 20 MB through the multipart API with a progress bar, and lists the file", async () => {
    const page = await signedIn(ADMIN, "#/w/default/sandboxes");
    await page.getByLabel("Name").fill("console-box");
    await page.getByRole("button", { name: "Create sandbox" }).click();
    await page.locator("h1", { hasText: "console-box" }).locator(".status", { hasText: "DEPLOYED" }).waitFor();
    await page.getByRole("link", { name: "Files" }).click();
    // Record every value the progress bar takes (the upload is too quick to watch by polling).
    await page.evaluate(() => {
      const seen: number[] = ((window as unknown as { progressSeen: number[] }).progressSeen = []);
      new MutationObserver(() => document.querySelectorAll("progress").forEach((p) => seen.push(p.value / p.max))).observe(document.body, {
        subtree: true,
        childList: true,
        attributes: true,
      });
    });
    const size = 20 * 1024 * 1024;
    // A file on disk: the browser reads it itself (a buffer would cross the DevTools protocol in base64).
    const file = join(trackedTempDir("console-upload-"), "big.bin");
    writeFileSync(file, Buffer.alloc(size, 7));
    await page.locator("input[type=file]").setInputFiles(file);
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await page.locator("tr[data-file='big.bin']", { hasText: "20 MiB" }).waitFor();
    const seen = await page.evaluate(() => (window as unknown as { progressSeen: number[] }).progressSeen);
    expect(seen.some((f) => f > 0 && f < 1)).toBe(true);
    const listing = await api("GET", "/sbx/default/console-box/filesystem/");
    expect(listing.files.find((f: { name: string }) => f.name === "big.bin")?.size).toBe(size);
    expect(await api("GET", "/sbx/default/console-box/filesystem-multipart")).toMatchObject({ uploads: [] });
    // View a text file, and download it.
    await api("PUT", "/sbx/default/console-box/filesystem/notes.txt", { content: "line one\nline two\n" });
    await page.getByRole("button", { name: "notes.txt" }).click();
    await page.locator(".viewer", { hasText: "line two" }).waitFor();
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.locator("tr[data-file='notes.txt']").getByRole("button", { name: "Download" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("notes.txt");
    expect(readFileSync((await download.path())!, "utf8")).toBe("line one\nline two\n");
    await page.close();
  });

  it("runs a command and shows its three lines as they arrive", async () => {
    const page = await signedIn(ADMIN, "#/w/default/sandboxes/console-box/processes");
    await page.evaluate(() => {
      const states: string[] = ((window as unknown as { logStates: string[] }).logStates = []);
      new MutationObserver(() => {
        const pre = document.querySelector("pre.logs");
        if (pre) states.push(`${pre.getAttribute("data-streaming")}|${pre.textContent}`);
      }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await page.getByLabel("Command").fill("for i in 1 2 3; do echo $i; sleep 1; done");
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await page.locator("pre.logs[data-streaming=false]", { hasText: "1\n2\n3" }).waitFor();
    await page.locator(".procs li", { hasText: "completed" }).waitFor();
    const states = await page.evaluate(() => (window as unknown as { logStates: string[] }).logStates);
    // Each line was on screen, still streaming, before the next one came.
    expect(states).toContain("true|1\n");
    expect(states).toContain("true|1\n2\n");
    expect(states.at(-1)).toBe("false|1\n2\n3\n");
    // Stop (SIGTERM) and kill (SIGKILL) from the output panel.
    for (const [how, status] of [
      ["Stop", "stopped"],
      ["Kill", "killed"],
    ] as const) {
      await page.getByLabel("Command").fill("sleep 300");
      await page.getByRole("button", { name: "Run", exact: true }).click();
      await page.locator("pre.logs[data-streaming=true]").waitFor();
      await page.locator(".panel", { hasText: "Output of" }).getByRole("button", { name: how, exact: true }).click();
      await page.locator(".procs li.selected", { hasText: status }).waitFor();
    }
    await page.close();
  });

  it("creates a schedule and shows its execution on the timeline, with its output", async () => {
    const page = await signedIn(ADMIN, "#/w/default/sandboxes/console-box/schedules");
    await page.getByLabel("Type").selectOption("sleep");
    await page.getByLabel("When", { exact: true }).fill("1s");
    await page.getByLabel("Command").fill("echo from-the-schedule");
    await page.getByRole("button", { name: "Create schedule" }).click();
    const run = page.locator(".timeline li", { hasText: "succeeded" });
    await run.waitFor({ timeout: 20_000 });
    expect(await run.textContent()).toContain("exit 0");
    await run.getByRole("button", { name: "output" }).click();
    await page.locator(".timeline pre", { hasText: "from-the-schedule" }).waitFor();
    await page.close();
  });

  it("shows account metrics whose table adds up to exactly what was ingested", async () => {
    await api("PUT", "/_sim/prices", { sandbox_compute_runtime_gbs: 0.00001, volume_storage_gbs: 0.000001, agent_compute_runtime_gbs: 0.00002 });
    const event = (workspace: string, resourceType: string, name: string, billingDimension: string, usage: number, timestamp: string) => ({
      timestamp,
      workspace,
      resourceType,
      resourceName: name,
      resourceUuid: `uuid-${name}`,
      billingDimension,
      usage,
    });
    await api("POST", "/_sim/usage-events", [
      event("acme-prod", "sandbox", "box-a", "sandbox_compute_runtime_gbs", 7200, "2026-01-05T10:00:00Z"),
      event("acme-dev", "sandbox", "box-b", "sandbox_compute_runtime_gbs", 3600, "2026-01-12T08:30:00Z"),
      event("acme-prod", "volume", "vol-a", "volume_storage_gbs", 86400, "2026-01-20T00:00:00Z"),
      event("acme-dev", "agent", "helper", "agent_compute_runtime_gbs", 1000, "2026-01-28T23:59:00Z"),
    ]);
    const page = await signedIn(ACME_ADMIN, "#/metrics");
    await page.getByLabel("Window").selectOption("custom");
    await page.getByLabel("From").fill("2026-01-01");
    await page.getByLabel("To (exclusive)").fill("2026-02-01");
    await page.locator("tfoot [data-total]", { hasText: "$0.2144" }).waitFor();
    const rows = async () =>
      page.locator("table[aria-label='Cost breakdown'] tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent?.trim())));
    expect(await rows()).toEqual([
      ["agent_compute_runtime_gbs", "1,000", "$0.02", "9.3%"],
      ["sandbox_compute_runtime_gbs", "10,800", "$0.108", "50.4%"],
      ["volume_storage_gbs", "86,400", "$0.0864", "40.3%"],
    ]);
    expect(await page.locator(".u-legend").textContent()).toContain("volume_storage_gbs");
    expect(await page.locator(".chart canvas").count()).toBe(1);
    await page.getByLabel("Group by").selectOption("workspace");
    await page.locator("tbody tr[data-group=acme-dev]").waitFor();
    expect(await rows()).toEqual([
      ["acme-dev", "$0.056", "26.1%"],
      ["acme-prod", "$0.1584", "73.9%"],
    ]);
    expect(await page.locator("tfoot [data-total]").textContent()).toBe("$0.2144");
    await page.close();
  });

  it("a member's key sees only its own workspace; another one answers the API's 403", async () => {
    const page = await signedIn(MEMBER);
    await page.locator(".card h2", { hasText: "acme-prod" }).waitFor();
    expect(await page.locator(".card h2").allTextContents()).toEqual(["acme-prod"]);
    expect(await page.locator(".ws-pick option").allTextContents()).toEqual(["acme-prod"]);
    await page.evaluate(() => (location.hash = "#/w/acme-dev/sandboxes"));
    await expect.poll(() => page.getByRole("alert").first().textContent()).toBe('403 forbidden the credential does not belong to workspace "acme-dev"');
    expect(await page.locator("tbody tr[data-row]").count()).toBe(0);
    await page.close();
  });

  it("starts a job execution, shows its tasks, and cancels it", async () => {
    await api("POST", "/v0/jobs", { metadata: { name: "batch" }, spec: { runtime: { image: "blaxel/job:latest", memory: 512 } } });
    await api("POST", "/_sim/clock", { freeze: true }); // nothing moves until unfrozen: the statuses are exact
    try {
      const page = await signedIn(ADMIN, "#/w/default/jobs/batch");
      await page.getByLabel("Tasks").fill('[{"duration":"5s"},{"duration":"5s"}]');
      await page.getByRole("button", { name: "Start execution" }).click();
      const row = page.locator("table[aria-label=Executions] tbody tr[data-row]");
      await row.locator(".status", { hasText: "queued" }).waitFor();
      await page.locator(".tasks li").first().waitFor(); // the new execution's tasks open at once
      expect(await page.locator(".tasks .status").allTextContents()).toEqual(["pending", "pending"]);
      await row.getByRole("button", { name: "Cancel" }).click();
      await row.locator(".status", { hasText: "cancelled" }).waitFor();
      await expect.poll(() => page.locator(".tasks .status").allTextContents()).toEqual(["cancelled", "cancelled"]);
      expect(await row.getByRole("button", { name: "Cancel" }).count()).toBe(0);
      await page.close();
    } finally {
      await api("POST", "/_sim/clock", { freeze: false });
    }
  });

  it("renews a client-credentials access token the simulator clock has expired", async () => {
    const sa = await api("POST", "/v0/service_accounts", { name: "console-renew" });
    const page = await browser.context.newPage();
    await page.goto(`${sim.url}/console#/w/default/volumes`);
    await page.getByRole("radio", { name: /client credentials/ }).check();
    await page.getByRole("textbox", { name: "Client ID" }).fill(sa.client_id);
    await page.getByLabel("Client secret").fill(sa.client_secret);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("tr[data-row=vol-zz]").waitFor();
    await api("POST", "/_sim/clock", { advanceMs: 3 * 3_600_000 }); // access tokens live 2 h
    await page.getByRole("link", { name: "Drives" }).click();
    await page.locator("table[aria-label=Drives] td", { hasText: "No drives." }).waitFor();
    expect(await page.getByRole("alert").count()).toBe(0);
    await page.close();
  });

  it("shows an injected fault as the API gave it, and drives the clock through the test hooks", async () => {
    await api("PUT", "/_sim/faults", { rules: [{ method: "POST", path: "/v0/sandboxes", status: 503, times: 1 }] });
    const page = await signedIn(ADMIN, "#/w/default/sandboxes");
    await page.getByLabel("Name").fill("never-made");
    await page.getByRole("button", { name: "Create sandbox" }).click();
    await expect.poll(() => page.getByRole("alert").first().textContent()).toBe("503 service_unavailable injected fault (status 503)");
    await page.evaluate(() => (location.hash = "#/hooks"));
    await page.getByRole("button", { name: "Freeze" }).click();
    await page.locator(".status", { hasText: "frozen" }).waitFor();
    const frozenAt = await page.locator("[data-clock]").textContent();
    await page.getByLabel("Advance by").fill("2");
    await page.getByLabel("Unit").selectOption("h");
    await page.getByRole("button", { name: "Advance" }).click();
    await expect.poll(() => page.locator("[data-clock]").textContent()).toBe(new Date(Date.parse(frozenAt!) + 7_200_000).toISOString());
    await page.getByRole("button", { name: "Unfreeze" }).click();
    await page.locator(".status", { hasText: "running" }).waitFor();
    // Manual transitions: an agent stays UPLOADING until stepped from the page.
    await page.getByRole("radio", { name: "manual" }).check();
    await expect.poll(async () => (await api("GET", "/_sim/transitions")).mode).toBe("manual");
    await api("POST", "/v0/agents", { metadata: { name: "stepped" }, spec: { runtime: { image: "x", memory: 512 } } });
    await page.getByLabel("Kind").selectOption("agent");
    await page.getByLabel("Name").fill("stepped");
    await page.getByRole("button", { name: "Step" }).click();
    await page.locator("code", { hasText: '"status":"BUILDING"' }).waitFor();
    expect((await api("GET", "/v0/agents/stepped")).status).toBe("BUILDING");
    await page.getByRole("radio", { name: "timed" }).check();
    await expect.poll(async () => (await api("GET", "/_sim/transitions")).mode).toBe("timed");
    await page.close();
  });
});
