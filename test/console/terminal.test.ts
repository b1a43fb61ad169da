import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../simulator/serve.js";
import { chromiumMissing, launchChromium, type Browser } from "../../console/tools/browser.js";
import { buildConsole } from "../../console/tools/build.js";
import { apiCaller } from "../../console/tools/call.js";
import { consoleDistDir } from "../../src/package-paths.js";

/**
 * The console's Terminal tab in Debian's Chromium (playwright-core): a real
 * shell in a real sandbox, typed into through xterm.js, under the console's
 * strict CSP (any violation fails the file).
 */
const ADMIN = "terminal-console-admin-key";
const missing = chromiumMissing();

describe.skipIf(missing !== undefined)(`the console's Terminal tab in Chromium${missing ? ` (skipped: ${missing})` : ""}`, () => {
  let sim: ServedSimulator;
  let browser: Browser;
  const problems: string[] = [];
  const api = apiCaller(() => sim.url, ADMIN);

  async function terminalPage(sandbox: string): Promise<Page> {
    const page = await browser.context.newPage();
    page.on("console", (m) => {
      if (/Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text());
    });
    page.on("pageerror", (err) => problems.push(err.message));
    await page.goto(`${sim.url}/console#/w/default/sandboxes/${sandbox}/terminal`);
    await page.getByRole("textbox", { name: "API key" }).fill(ADMIN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator(".terminal-state[data-state=connected]").waitFor();
    return page;
  }

  const screen = (page: Page) => page.locator(".xterm-rows").innerText();

  /** Types a command into the terminal (xterm's own input element, as a user's keys) and presses Enter. */
  async function type(page: Page, command: string): Promise<void> {
    // As a user would, once the prompt shows: a shell still starting may discard keys typed ahead of it.
    await expect.poll(async () => (await screen(page)).trimEnd(), { timeout: 15_000 }).toMatch(/[#$]$/);
    await page.locator(".terminal-host").click();
    await page.keyboard.type(command);
    await page.keyboard.press("Enter");
  }

  async function sandboxDeployed(name: string): Promise<void> {
    for (let i = 0; i < 600 && (await api("GET", `/v0/sandboxes/${name}`)).status !== "DEPLOYED"; i++) await new Promise((r) => setTimeout(r, 50));
  }

  beforeAll(async () => {
    if (!existsSync(join(consoleDistDir(), "index.html"))) await buildConsole();
    sim = await serveSimulator({ port: 0, apiKey: ADMIN, testHooks: true, logLevel: "warn" }, { launcher: "process" });
    await api("POST", "/v0/sandboxes", { metadata: { name: "term-box" } });
    await sandboxDeployed("term-box");
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await sim?.stop();
    expect(problems).toEqual([]);
  }, 60_000);

  it("opens a shell: a typed command's output appears", async () => {
    const page = await terminalPage("term-box");
    await type(page, "echo hi-$((40+2))");
    await expect.poll(() => screen(page)).toMatch(/^hi-42$/m);
    // 24-bit colour: xterm styles the cell itself, through CSSOM here (no CSP report; the file fails on any).
    await type(page, "printf '\\033[38;2;255;0;0mtrue-red\\033[0m\\n'");
    await expect
      .poll(() =>
        page
          .locator(".xterm-rows span", { hasText: /^true-red$/ })
          .last()
          .evaluate((el) => getComputedStyle(el).color),
      )
      .toBe("rgb(255, 0, 0)");
    // The key stayed out of every URL the page loaded or opened: the socket carried a session token.
    expect(page.url()).not.toContain(ADMIN);
    await page.close();
  });

  it("follows the window's size: stty size after a resize matches the rows and columns on screen", async () => {
    const page = await terminalPage("term-box");
    const sizeOnScreen = async (tag: string) => {
      await type(page, `echo ${tag}-$(stty size | tr ' ' -)`);
      const pattern = new RegExp(`^${tag}-(\\d+)-(\\d+)$`, "m");
      await expect.poll(() => screen(page)).toMatch(pattern);
      const [, rows, cols] = pattern.exec(await screen(page))!.map(Number);
      return { rows: rows!, cols: cols! };
    };
    const wide = await sizeOnScreen("wide");
    expect(wide.rows).toBe(await page.locator(".xterm-rows > div").count());
    await page.setViewportSize({ width: 900, height: 600 });
    await expect.poll(() => page.locator(".xterm-rows > div").count()).toBeLessThan(wide.rows);
    const narrow = await sizeOnScreen("narrow");
    expect(narrow.cols).toBeLessThan(wide.cols);
    expect(narrow.rows).toBe(await page.locator(".xterm-rows > div").count());
    await page.close();
  });

  it("a stopped sandbox shows why instead of a blank pane, and the tab reconnects when it runs again", async () => {
    await api("POST", "/v0/sandboxes", { metadata: { name: "restart-box" } });
    await sandboxDeployed("restart-box");
    const page = await terminalPage("restart-box");
    await api("POST", "/v0/sandboxes/restart-box/archive");
    await expect.poll(() => screen(page), { timeout: 30_000 }).toMatch(/The sandbox is [A-Z]+: the terminal connects when it runs again/);
    await expect.poll(async () => (await api("GET", "/v0/sandboxes/restart-box")).status, { timeout: 30_000 }).toBe("ARCHIVED");
    await api("POST", "/v0/sandboxes/restart-box/unarchive");
    await sandboxDeployed("restart-box");
    await page.locator(".terminal-state[data-state=connected]").waitFor({ timeout: 30_000 });
    await type(page, "echo back-$((6*7))");
    await expect.poll(() => screen(page)).toMatch(/^back-42$/m);
    await page.close();
  });

  it("after the shell exits, a key starts a new one", async () => {
    const page = await terminalPage("term-box");
    await type(page, "exit 4");
    await expect.poll(() => screen(page)).toContain("[shell exited with status 4] Press a key for a new shell.");
    await page.keyboard.press("Enter");
    await page.locator(".terminal-state[data-state=connected]").waitFor();
    await type(page, "echo again-$((1+1))");
    await expect.poll(() => screen(page)).toMatch(/^again-2$/m);
    await page.close();
  });
});
