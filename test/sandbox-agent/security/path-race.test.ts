import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";

/**
 * #14 item 12: a process in the sandbox swaps a directory for a symlink to the
 * outside while the API writes and reads through it. Resolution holds the
 * directories open (paths/beneath.ts), so no write lands outside the root and
 * no read returns the outside file, however the swap interleaves.
 */
const SWAPPER = `
const { renameSync } = require("node:fs");
const [dir, real, link, ms] = process.argv.slice(1);
const end = Date.now() + Number(ms);
while (Date.now() < end) {
  try { renameSync(real, dir); renameSync(dir, real); renameSync(link, dir); renameSync(dir, link); } catch {}
}
`;

let agent: TestAgent | undefined;
afterAll(() => agent?.stop());

describe("a directory swapped for a symlink during requests", () => {
  it("never writes or reads outside --root", async () => {
    agent = await startTestAgent();
    const outside = tempDir("sandbox-kit-outside-");
    writeFileSync(join(outside, "secret"), "OUTSIDE");
    const real = join(agent.root, "real");
    mkdirSync(real);
    writeFileSync(join(real, "secret"), "inside");
    const link = join(agent.root, "link");
    const { symlinkSync } = await import("node:fs");
    symlinkSync(outside, link);

    const swapper = spawn(process.execPath, ["-e", SWAPPER, join(agent.root, "d"), real, link, "2000"], { stdio: "ignore" });
    const swapperDone = new Promise((resolve) => swapper.on("exit", resolve));
    let stop = false;
    void swapperDone.then(() => (stop = true));
    let outsideReads = 0;
    let requests = 0;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        requests++;
        await fetch(`${agent!.url}/filesystem/d/f-${w}-${i}`, {
          method: "PUT",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ content: "x" }),
        }).then((r) => r.arrayBuffer()).catch(() => undefined);
        const read = await fetch(`${agent!.url}/filesystem/d/secret`).then((r) => r.text()).catch(() => "");
        if (read.includes("OUTSIDE")) outsideReads++;
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
    await swapperDone;
    expect(requests).toBeGreaterThan(16);
    expect(readdirSync(outside)).toEqual(["secret"]);
    expect(outsideReads).toBe(0);
  }, 60_000);
});
