import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { startSwapper } from "../../helpers/swapper.js";

/**
 * The MCP file tools: a process in the sandbox swaps a directory
 * for a symlink to the outside while an AI agent reads a file in it with
 * fsReadFile (edits it with fsEditFile, lists it with fsListDirectory). A tool that resolves the path and
 * then reads the path string reads the outside file when the swap lands in
 * between; one that reads through the descriptor it resolved never does.
 */
const PAIRS = 8;
let agent: TestAgent | undefined;
afterAll(() => agent?.stop());

async function callTool(name: string, args: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${agent!.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  return res.text();
}

describe("a directory swapped for a symlink while an MCP tool reads in it", () => {
  it("never reads what lies outside --root", async () => {
    agent = await startTestAgent();
    const outside = tempDir("sandbox-kit-outside-");
    writeFileSync(join(outside, "notes.txt"), "SECRET outside\n");
    writeFileSync(join(outside, "outside-only.txt"), "");
    const tree = join(agent.root, "tree");
    for (let k = 0; k < PAIRS; k++) {
      mkdirSync(join(tree, `real-${k}`), { recursive: true });
      writeFileSync(join(tree, `real-${k}`, "notes.txt"), "public inside\n");
      symlinkSync(outside, join(tree, `link-${k}`));
    }
    const pairs = Array.from({ length: PAIRS }, (_, k) => ({ dir: join(tree, `x-${k}`), real: join(tree, `real-${k}`), link: join(tree, `link-${k}`) }));
    const swapper = startSwapper(pairs, 2500);
    const leaks: string[] = [];
    let read = 0;
    const client = async (c: number) => {
      for (let i = c; swapper.running; i++) {
        const path = `/tree/x-${i % PAIRS}/notes.txt`;
        const tool = i % 3;
        const text =
          tool === 0
            ? await callTool("fsReadFile", { path })
            : tool === 1
              ? await callTool("fsEditFile", { path, oldString: "SECRET", newString: "LEAKED" })
              : await callTool("fsListDirectory", { path: `/tree/x-${i % PAIRS}` });
        if (text.includes("public inside")) read++;
        if ((text.includes("SECRET") && !text.includes("oldString not found")) || text.includes("outside-only")) leaks.push(text.slice(0, 200));
      }
    };
    await Promise.all([0, 1, 2].map(client));
    await swapper.done;
    expect(read).toBeGreaterThan(0);
    expect(leaks).toEqual([]);
    expect(readFileSync(join(outside, "notes.txt"), "utf8")).toBe("SECRET outside\n"); // no edit landed there either
  }, 60_000);
});
