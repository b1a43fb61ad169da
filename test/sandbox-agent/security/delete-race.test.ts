import { mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { startSwapper } from "../../helpers/swapper.js";

/**
 * Recursive deletes: a process in the sandbox keeps swapping a
 * directory inside the tree being deleted for a symlink to the outside. A
 * delete that re-resolves `tree/x/file` strings (fs.rm) lists and unlinks the
 * outside files when the swap lands between its lstat and its readdir; one
 * that walks held descriptors removes the link itself and nothing outside.
 */
const FILES = 40;
let agent: TestAgent | undefined;
afterAll(() => agent?.stop());

describe("a directory swapped for a symlink during a recursive delete", () => {
  it("never deletes outside --root (DELETE /filesystem and /filesystem/tree)", async () => {
    agent = await startTestAgent();
    const outside = tempDir("sandbox-kit-outside-");
    const keep = Array.from({ length: FILES }, (_, i) => `keep-${i}`);
    for (const name of keep) writeFileSync(join(outside, name), "OUTSIDE");
    const tree = join(agent.root, "victim");
    // The link lives beside the tree, so the delete cannot remove it before the swapper has moved it in.
    const spare = join(agent.root, "spare-link");
    /** The tree to delete: a real directory full of files (the name the swapper toggles), built aside, then renamed in. */
    const plant = (n: number) => {
      try {
        symlinkSync(outside, spare);
      } catch {
        /* still there */
      }
      const stage = join(agent!.root, `stage-${n}`);
      mkdirSync(join(stage, "real"), { recursive: true });
      for (let i = 0; i < FILES; i++) writeFileSync(join(stage, "real", `f-${i}`), "inside");
      try {
        renameSync(stage, tree);
      } catch {
        rmSync(stage, { recursive: true }); // the last delete failed part-way: its tree stays for the next one
      }
    };
    plant(0);
    const swapper = startSwapper([{ dir: join(tree, "x"), real: join(tree, "real"), link: spare }], 2500);
    let deletes = 0;
    for (let i = 0; swapper.running; i++) {
      const url = i % 2 === 0 ? `${agent.url}/filesystem/victim?recursive=true` : `${agent.url}/filesystem/tree/victim?recursive=true`;
      const res = await fetch(url, { method: "DELETE" });
      await res.arrayBuffer();
      if (res.status === 200) deletes++;
      plant(0);
    }
    await swapper.done;
    expect(deletes).toBeGreaterThan(0);
    expect(readdirSync(outside).sort()).toEqual([...keep].sort());
  }, 60_000);
});
