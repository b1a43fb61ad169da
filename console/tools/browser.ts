import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

/**
 * Debian's Chromium (`apt-get install chromium`), driven by playwright-core:
 * headless, no sandbox (CI runs as root), nothing talking to the network
 * beyond the page, and a fresh profile removed on close.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Why the browser cannot run here, or undefined when it can. */
export function chromiumMissing(): string | undefined {
  return existsSync(CHROMIUM_PATH) ? undefined : `no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set CHROMIUM_PATH)`;
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(viewport = { width: 1280, height: 800 }): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), "console-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport,
      acceptDownloads: true,
    });
    return {
      context,
      close: async () => {
        await context.close().catch(() => undefined);
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
}
