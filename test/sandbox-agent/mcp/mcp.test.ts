import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../../sandbox-agent/app.js";
import { listen } from "../../../src/serve.js";
import { kernelConfined, startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { loadSdk } from "../../helpers/sdk.js";
import { killAll } from "../process/helpers.js";

const TOKEN = "mcp-token";
let agent: TestAgent;
let client: Client;

type CallResult = { isError?: boolean; structuredContent?: Record<string, unknown>; content: { type: string; text: string }[] };
const call = async (name: string, args: Record<string, unknown> = {}) => (await client.callTool({ name, arguments: args })) as CallResult;
const ok = async (name: string, args: Record<string, unknown> = {}) => {
  const result = await call(name, args);
  expect(result.isError, result.content[0]?.text).toBeFalsy();
  expect(JSON.parse(result.content[0]!.text)).toEqual(result.structuredContent);
  return result.structuredContent as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
};
const fails = async (name: string, args: Record<string, unknown>) => {
  const result = await call(name, args);
  expect(result.isError).toBe(true);
  return result.content[0]!.text;
};

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  mkdirSync(join(agent.root, "app/src/lib"), { recursive: true });
  writeFileSync(join(agent.root, "app/src/lib/process-manager.ts"), "export const a = 1;\nconst needle = 'Find Me';\n");
  writeFileSync(join(agent.root, "app/src/index.ts"), "import './lib/process-manager';\nconsole.log('find me too');\n");
  writeFileSync(join(agent.root, "app/notes.md"), "find me in markdown\n");
  client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${agent.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
});
afterAll(async () => {
  await client.close();
  killAll(agent);
  await agent.stop();
});

describe("/mcp transport", () => {
  it("identifies as the reference does and lists its tools, model tools included", async () => {
    expect(client.getServerVersion()).toEqual({ name: "Sandbox API Server", version: "1.0.0" });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "codegenCodebaseSearch",
      "codegenEditFile",
      "codegenFileSearch",
      "codegenGrepSearch",
      "codegenListDir",
      "codegenParallelApply",
      "codegenReadFileRange",
      "codegenReapply",
      "codegenRerank",
      "fsDeleteFileOrDirectory",
      "fsEditFile",
      "fsGetWorkingDirectory",
      "fsListDirectory",
      "fsReadFile",
      "fsWriteFile",
      "processExecute",
      "processGet",
      "processGetLogs",
      "processKill",
      "processStop",
      "processesList",
    ]);
    for (const t of tools) {
      expect(t.description).toBeTruthy();
      expect(t.inputSchema).toMatchObject({ type: "object", additionalProperties: false });
    }
    expect(tools.find((t) => t.name === "fsEditFile")!.inputSchema.required).toEqual(["path", "oldString", "newString"]);
  });

  it("is behind the agent's auth; GET answers 405; stateless calls work without initialize", async () => {
    const rpc = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fsGetWorkingDirectory", arguments: {} } };
    await request(agent.url).post("/mcp").set("Accept", "application/json, text/event-stream").send(rpc).expect(401);
    const res = await request(agent.url)
      .post("/mcp")
      .set("Authorization", `Bearer ${TOKEN}`)
      .set("Accept", "application/json, text/event-stream")
      .send(rpc)
      .expect(200);
    expect(res.body.result.structuredContent).toEqual({ path: "/" });
    expect((await request(agent.url).get("/mcp").set("Authorization", `Bearer ${TOKEN}`).expect(405)).body.error).toMatch(/SSE streaming not supported/);
  });

  it("a POST on a loopback socket naming another host is 403 (the reference's DNS rebinding protection); loopback names pass", async () => {
    const rpc = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fsGetWorkingDirectory", arguments: {} } };
    const post = (host: string) =>
      request(agent.url).post("/mcp").set("Host", host).set("Authorization", `Bearer ${TOKEN}`).set("Accept", "application/json, text/event-stream").send(rpc);
    for (const host of ["evil.example", "evil.example:80", "localhost.evil.example", "127.0.0.1.evil.example", "192.0.2.9:8080"]) {
      const res = await post(host);
      expect(res.status, host).toBe(403);
      expect(res.body, host).toEqual({ error: `Forbidden: invalid Host header "${host}"` });
    }
    for (const host of ["localhost", "LocalHost:3000", "127.0.0.1:1", "127.9.8.7", "[::1]:80", "[::1]"]) expect((await post(host)).status, host).toBe(200);
    expect((await request(agent.url).get("/mcp").set("Host", "evil.example").set("Authorization", `Bearer ${TOKEN}`)).status).toBe(405); // POST only, as there
  });

  it("a request on another interface is not concerned", async () => {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === "IPv4" && !i.internal);
    if (!external) return; // a machine with loopback only
    const serving = await listen(createApp(agent.runtime.deps), external.address, 0);
    try {
      const rpc = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fsGetWorkingDirectory", arguments: {} } };
      const res = await request(serving.url)
        .post("/mcp")
        .set("Host", "sandbox.example")
        .set("Authorization", `Bearer ${TOKEN}`)
        .set("Accept", "application/json, text/event-stream")
        .send(rpc);
      expect(res.status).toBe(200);
    } finally {
      await serving.stop(1_000);
    }
  });

  it("an unknown tool is a JSON-RPC error -32602, as the reference answers", async () => {
    await expect(client.callTool({ name: "noSuchTool", arguments: {} })).rejects.toThrow(/unknown tool "noSuchTool"/);
    const rpc = { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "noSuchTool", arguments: {} } };
    const res = await request(agent.url)
      .post("/mcp")
      .set("Authorization", `Bearer ${TOKEN}`)
      .set("Accept", "application/json, text/event-stream")
      .send(rpc)
      .expect(200);
    expect(res.body).toEqual({ jsonrpc: "2.0", id: 7, error: { code: -32602, message: 'unknown tool "noSuchTool"' } });
  });
});

describe("filesystem tools", () => {
  it("write, read, list, edit, delete — confined under the root", async () => {
    expect(await ok("fsWriteFile", { path: "/app/hello.txt", content: "one two two\n" })).toEqual({
      path: "/app/hello.txt",
      message: "File created/updated successfully",
    });
    expect(readFileSync(join(agent.root, "app/hello.txt"), "utf8")).toBe("one two two\n");
    const read = await ok("fsReadFile", { path: "app/hello.txt" });
    expect(read).toMatchObject({ path: "/app/hello.txt", name: "hello.txt", content: "one two two\n", size: 12, permissions: "644" });
    const listed = await ok("fsListDirectory", { path: "/app" });
    expect(listed.directory.files.map((f: { name: string }) => f.name)).toEqual(["hello.txt", "notes.md"]);
    expect(listed.directory.subdirectories).toEqual([{ path: "/app/src", name: "src" }]);
    expect(await ok("fsWriteFile", { path: "/app/dir", isDirectory: true, permissions: "0700" })).toMatchObject({ message: "Directory created successfully" });
    expect(statSync(join(agent.root, "app/dir")).mode & 0o777).toBe(0o700);
    expect(await fails("fsReadFile", { path: "/app/dir" })).toMatch(/is a directory/);
    expect(await fails("fsReadFile", { path: "/../../etc/passwd" })).toMatch(/escapes the sandbox root/);
    expect(await ok("fsDeleteFileOrDirectory", { path: "/app/dir" })).toEqual({ path: "/app/dir", message: "Directory deleted successfully" });
  });

  it("fsEditFile: once when unique, every occurrence with replaceAll; errors for absent, ambiguous, identical, empty", async () => {
    await ok("fsWriteFile", { path: "/app/edit.txt", content: "alpha beta beta gamma" });
    expect(await ok("fsEditFile", { path: "/app/edit.txt", oldString: "alpha", newString: "ALPHA" })).toEqual({
      path: "/app/edit.txt",
      occurrencesReplaced: 1,
    });
    expect(await fails("fsEditFile", { path: "/app/edit.txt", oldString: "beta", newString: "B" })).toMatch(/found 2 times/);
    expect(await fails("fsEditFile", { path: "/app/edit.txt", oldString: "delta", newString: "D" })).toMatch(/not found/);
    expect(await fails("fsEditFile", { path: "/app/edit.txt", oldString: "gamma", newString: "gamma" })).toMatch(/identical/);
    expect(await fails("fsEditFile", { path: "/app/edit.txt", oldString: "", newString: "x" })).toMatch(/must not be empty/);
    expect(await ok("fsEditFile", { path: "/app/edit.txt", oldString: "beta", newString: "B", replaceAll: true })).toMatchObject({ occurrencesReplaced: 2 });
    expect(readFileSync(join(agent.root, "app/edit.txt"), "utf8")).toBe("ALPHA B B gamma");
  });

  it("a symlink out of the root is refused (path-checks) or stays under the root (openat2)", async () => {
    const { symlinkSync } = await import("node:fs");
    symlinkSync(tmpdir(), join(agent.root, "app/out"));
    expect(await fails("fsListDirectory", { path: "/app/out" })).toMatch(kernelConfined(agent) ? /no such file or directory/ : /outside the sandbox root/);
  });
});

describe("process tools (one process table with /process)", () => {
  it("processExecute waits and returns logs; processGet, processGetLogs and processesList see it; HTTP too", async () => {
    const done = await ok("processExecute", { command: "echo from-mcp; exit 3", name: "mcp-run", waitForCompletion: true });
    expect(done).toEqual({ pid: expect.stringMatching(/^\d+$/), name: "mcp-run", status: "failed", exitCode: 3, logs: "from-mcp\n" });
    expect(await ok("processGet", { identifier: "mcp-run" })).toMatchObject({ name: "mcp-run", status: "failed", workingDir: "/", stdout: "from-mcp\n" });
    expect(await ok("processGetLogs", { identifier: done.pid })).toEqual({ logs: "from-mcp\n" });
    expect((await ok("processesList")).processes.map((p: { name: string }) => p.name)).toContain("mcp-run");
    expect((await request(agent.url).get("/process/mcp-run").set("Authorization", `Bearer ${TOKEN}`).expect(200)).body.exitCode).toBe(3);
    expect(await fails("processGet", { identifier: "nobody" })).toBe("failed to get process: process 'nobody' not found");
  });

  it("processStop and processKill; a short timeout is a tool error and the process keeps running", async () => {
    expect(await fails("processExecute", { command: "sleep 30", name: "mcp-slow", waitForCompletion: true, timeout: 1 })).toBe(
      "process timed out after 1 seconds",
    );
    expect(await ok("processGet", { identifier: "mcp-slow" })).toMatchObject({ status: "running" });
    expect(await ok("processStop", { identifier: "mcp-slow" })).toEqual({ status: "stopped" });
    await ok("processExecute", { command: "sleep 30", name: "mcp-kill" });
    expect(await ok("processKill", { identifier: "mcp-kill" })).toEqual({ status: "killed" });
    expect(await fails("processKill", { identifier: "mcp-kill" })).toMatch(/^failed to kill process: .*not running/);
  });
});

describe("codegen tools", () => {
  it("codegenFileSearch: subsequence on names, absolute paths; codegenListDir; codegenReadFileRange", async () => {
    expect(await ok("codegenFileSearch", { query: "prcmgr", directory: "/app" })).toEqual({
      success: true,
      matches: ["/app/src/lib/process-manager.ts"],
      query: "prcmgr",
    });
    expect(await ok("codegenFileSearch", { query: "zzzz" })).toEqual({ success: true, matches: null, query: "zzzz" });
    expect((await ok("codegenListDir", { relativeWorkspacePath: "app/src" })).directory.subdirectories).toEqual([{ path: "/app/src/lib", name: "lib" }]);
    expect(await ok("codegenReadFileRange", { targetFile: "/app/src/index.ts", startLineOneIndexed: 2, endLineOneIndexedInclusive: 2 })).toEqual({
      success: true,
      content: "console.log('find me too');",
      file: "/app/src/index.ts",
    });
    expect(await fails("codegenReadFileRange", { targetFile: "/app/src/index.ts", startLineOneIndexed: 2, endLineOneIndexedInclusive: 9 })).toMatch(
      /invalid line range/,
    );
    expect(await fails("codegenReadFileRange", { targetFile: "/app/src/index.ts", startLineOneIndexed: 2, endLineOneIndexedInclusive: 1 })).toMatch(
      /invalid line range/,
    );
  });

  it("codegenGrepSearch: regex, case, include/exclude globs, rg --json lines", async () => {
    const all = await ok("codegenGrepSearch", { query: "find me" });
    const lines = (all.results as string)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const matched = lines
      .filter((l) => l.type === "match")
      .map((l) => l.data.path.text)
      .sort();
    expect(matched).toEqual(["app/notes.md", "app/src/index.ts", "app/src/lib/process-manager.ts"]);
    expect(lines.at(-1)).toMatchObject({ type: "summary", data: { stats: { matches: 3 } } });
    const first = lines.find((l) => l.type === "match" && l.data.path.text === "app/src/index.ts");
    expect(first.data).toMatchObject({
      line_number: 2,
      lines: { text: "console.log('find me too');\n" },
      submatches: [{ match: { text: "find me" }, start: 13, end: 20 }],
    });
    const cased = await ok("codegenGrepSearch", { query: "Find Me", caseSensitive: true });
    expect((cased.results as string).match(/"type":"match"/g)).toHaveLength(1);
    const ts = await ok("codegenGrepSearch", { query: "find\\s+me", includePattern: "*.ts", excludePattern: "**/lib/**" });
    expect((ts.results as string).match(/"type":"match"/g)).toHaveLength(1);
    expect(await fails("codegenGrepSearch", { query: "no such text anywhere" })).toMatch(/exit status 1/);
    expect(await fails("codegenGrepSearch", { query: "(" })).toMatch(/invalid regular expression/);
  });

  it("tools that need an outside model answer a tool error naming what is missing", async () => {
    expect(await fails("codegenEditFile", { targetFile: "/a", instructions: "x", codeEdit: "y" })).toMatch(
      /codegenEditFile needs an outside code model.*RELACE_API_KEY or MORPH_API_KEY/,
    );
    expect(await fails("codegenRerank", { path: "/", query: "x" })).toMatch(/codegenRerank needs an outside code model/);
  });
});

describe("@blaxel/core's MCP client for sandboxes (getTool('sandbox/<name>'))", () => {
  it("lists the tools and calls one through the SDK", async () => {
    process.env.BL_SANDBOX_MCPSBX_URL = agent.url;
    const { getTool } = await loadSdk({ apiKey: TOKEN });
    const tools = await getTool("sandbox/mcpsbx", { ms: 1 });
    expect(tools.map((t) => t.name)).toContain("fsReadFile");
    const read = tools.find((t) => t.name === "fsReadFile")!;
    const result = (await read.call({ path: "/app/notes.md" })) as CallResult;
    expect(result.structuredContent).toMatchObject({ path: "/app/notes.md", content: "find me in markdown\n" });
  });
});
