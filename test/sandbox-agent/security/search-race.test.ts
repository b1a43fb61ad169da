import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { startSwapper } from "../../helpers/swapper.js";

/**
 * Searches: a process in the sandbox keeps swapping a directory
 * of the searched tree for a symlink to the outside while find, fuzzy search
 * and grep walk it. A walk that lists `tree/x` by path after seeing `x` as a
 * directory lists the outside when the swap lands in between; one that opens
 * each directory O_NOFOLLOW from its parent's descriptor never does.
 */
const PAIRS = 16;
let agent: TestAgent | undefined;
afterAll(() => agent?.stop());

describe("a directory swapped for a symlink during a search", () => {
  it("never lists or reads what lies outside --root", async () => {
    agent = await startTestAgent();
    const outside = tempDir("sandbox-kit-outside-");
    for (let i = 0; i < 20; i++) writeFileSync(join(outside, `outside-${i}.txt`), "SECRET\n");
    // One level down, so the swapped name is always in the walk (a search shares its top level out among workers by name).
    const tree = join(agent.root, "tree", "sub");
    // Several swapped names per walk, so each search has several chances to meet a swap.
    for (let k = 0; k < PAIRS; k++) {
      mkdirSync(join(tree, `real-${k}`), { recursive: true });
      for (let i = 0; i < 20; i++) writeFileSync(join(tree, `real-${k}`, `inside-${i}.txt`), "public\n");
      symlinkSync(outside, join(tree, `link-${k}`));
    }
    // Entries visited before each `x-k` (names sort lower): they widen the window between listing the tree and entering x-k.
    for (let i = 0; i < 3000; i++) writeFileSync(join(tree, `top-${i}.txt`), "public\n");

    const pairs = Array.from({ length: PAIRS }, (_, k) => ({ dir: join(tree, `x-${k}`), real: join(tree, `real-${k}`), link: join(tree, `link-${k}`) }));
    const swapper = startSwapper(pairs, 2500);
    const searches = ["/filesystem-find/tree?patterns=outside-*", "/filesystem-search/tree?query=outside", "/filesystem-content-search/tree?query=SECRET"];
    const leaks: string[] = [];
    let answered = 0;
    const client = async (c: number) => {
      for (let i = c; swapper.running; i++) {
        const text = await fetch(`${agent!.url}${searches[i % searches.length]}`)
          .then((r) => (r.ok ? r.text() : ""))
          .catch(() => "");
        if (text) answered++;
        if (text.includes("outside-") || text.includes('"text":"SECRET')) leaks.push(text.slice(0, 200));
      }
    };
    await Promise.all([0, 1].map(client));
    await swapper.done;
    expect(answered).toBeGreaterThan(2);
    expect(leaks).toEqual([]);
  }, 60_000);
});
