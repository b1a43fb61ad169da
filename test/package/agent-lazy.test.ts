import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_NODE_FLAGS } from "../../simulator/launcher/agent-main.js";

/**
 * The agent as sandboxes run it (the bundle through its stub, dist/agent, under the agent's V8 flags) loads some
 * of its parts only on first use: the MCP server's session, the search workers, the file watcher. In-process tests
 * of those routes build the app from the compiled modules, not from the bundle, so a bundle that lost one of
 * them (a worker file not found from the bundle's place, an import() the loader cannot run) would pass them:
 * each is used here for the first time in a bundled agent. Runs after `npm run build` (npm test builds first).
 */
const stub = resolve(import.meta.dirname, "../../dist/sandbox-agent/main.js");
const TOKEN = "lazy-parts-token";
const auth = { authorization: `Bearer ${TOKEN}` };

let dir = "";
let agent: ChildProcess;
let exited: Promise<unknown>;
let url = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agent-lazy-"));
  const env: NodeJS.ProcessEnv = { ...process.env, SANDBOX_AGENT_TOKEN: TOKEN };
  delete env.NODE_OPTIONS; // vitest's, if any, would change V8's flags
  agent = spawn(process.execPath, [...AGENT_NODE_FLAGS, stub, "--port", "0", "--root", join(dir, "root"), "--data-dir", join(dir, "data")], {
    stdio: ["ignore", "pipe", "pipe"],
    env,
  });
  let stderr = "";
  agent.stderr!.on("data", (d: Buffer) => (stderr += d));
  exited = new Promise((done) => agent.once("exit", done));
  url = await new Promise<string>((done, fail) => {
    let out = "";
    agent.stdout!.on("data", (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) done(m[1]!);
    });
    void exited.then(() => fail(new Error(`the agent exited: ${stderr}`)));
  });
  const tree = await fetch(`${url}/filesystem/tree/app`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ files: { "src/index.ts": "export const answer = 42;\n", "package.json": '{"name":"app"}\n' } }),
  });
  expect(tree.status).toBe(200);
}, 60_000);

afterAll(async () => {
  agent?.kill("SIGKILL");
  await exited;
  rmSync(dir, { recursive: true, force: true });
});

describe("a bundled agent's parts loaded on first use", () => {
  it("fuzzy search and content search (the search workers)", async () => {
    const search = await fetch(`${url}/filesystem-search/app?query=idxts`, { headers: auth });
    expect(search.status).toBe(200);
    expect(((await search.json()) as { matches: { path: string }[] }).matches.map((m) => m.path)).toContain("src/index.ts");
    const grep = await fetch(`${url}/filesystem-content-search/app?query=answer`, { headers: auth });
    expect(grep.status).toBe(200);
    const found = (await grep.json()) as { matches: { path: string; line: number }[] };
    expect(found.matches.map((m) => [m.path.endsWith("src/index.ts"), m.line])).toEqual([[true, 1]]);
  });

  it("watch: a file written after the stream opened arrives as an event", async () => {
    const controller = new AbortController();
    const watch = await fetch(`${url}/watch/filesystem/app/**`, { headers: auth, signal: controller.signal });
    expect(watch.status).toBe(200);
    const reader = watch.body!.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    const event = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return seen;
        seen += decoder.decode(value, { stream: true });
        if (seen.includes("new.txt")) return seen;
      }
    })();
    // The watcher may still be setting up when the head arrives: write until an event says so.
    let written = 0;
    const writer = setInterval(() => {
      void fetch(`${url}/filesystem/app/new.txt`, {
        method: "PUT",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ content: `write ${written++}` }),
      });
    }, 200);
    try {
      const lines = await event;
      const first = lines
        .split("\n")
        .filter((l) => l.includes("new.txt"))
        .map((l) => JSON.parse(l) as { op: string; name: string });
      expect(first[0]).toMatchObject({ name: "new.txt" });
      expect(["CREATE", "WRITE"]).toContain(first[0]!.op);
    } finally {
      clearInterval(writer);
      controller.abort();
    }
  });

  it("MCP: a tools/call answered by the server loaded on the first /mcp request", async () => {
    const res = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fsReadFile", arguments: { path: "/app/package.json" } } }),
    });
    expect(res.status).toBe(200);
    const reply = (await res.json()) as { result: { isError?: boolean; structuredContent: { content: string } } };
    expect(reply.result.isError).toBeFalsy();
    expect(reply.result.structuredContent.content).toBe('{"name":"app"}\n');
  });
});
