import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { startSwapper } from "../../helpers/swapper.js";

/**
 * A process in the sandbox swaps a directory for a symlink to the
 * outside while the API writes and reads through it. Resolution holds the
 * directories open (paths/beneath.ts), so no write lands outside the root and
 * no read returns the outside file, however the swap interleaves.
 */
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

    const swapper = startSwapper([{ dir: join(agent.root, "d"), real, link }], 2000);
    let outsideReads = 0;
    let requests = 0;
    const worker = async (w: number) => {
      for (let i = 0; swapper.running; i++) {
        requests++;
        await fetch(`${agent!.url}/filesystem/d/f-${w}-${i}`, {
          method: "PUT",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ content: "x" }),
        })
          .then((r) => r.arrayBuffer())
          .catch(() => undefined);
        const read = await fetch(`${agent!.url}/filesystem/d/secret`)
          .then((r) => r.text())
          .catch(() => "");
        if (read.includes("OUTSIDE")) outsideReads++;
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
    await swapper.done;
    expect(requests).toBeGreaterThan(16);
    expect(readdirSync(outside)).toEqual(["secret"]);
    expect(outsideReads).toBe(0);
  }, 60_000);
});
