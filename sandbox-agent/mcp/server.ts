import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { Router, json } from "express";
import { registerCodegenTools } from "./codegen-tools.js";
import type { ToolContext } from "./context.js";
import { registerFsTools } from "./fs-tools.js";
import { registerProcessTools } from "./process-tools.js";

/**
 * The MCP SDK is loaded on the first /mcp request, not at start: it is ~9 MiB
 * of the agent's resident memory, which every sandbox would carry (and a
 * multipart upload's peak RSS on top of it) whether or not MCP is ever used.
 */
function loadSdk() {
  // Node keeps loaded modules: only the first call reads them.
  return Promise.all([import("@modelcontextprotocol/sdk/server/mcp.js"), import("@modelcontextprotocol/sdk/server/streamableHttp.js")]);
}

/** The reference's server identity and capabilities (§9.11). */
export async function createMcpServer(ctx: ToolContext): Promise<McpServer> {
  const [{ McpServer }] = await loadSdk();
  const server = new McpServer({ name: "Sandbox API Server", version: "1.0.0" }, { capabilities: { logging: {}, tools: { listChanged: true } } });
  registerFsTools(server, ctx);
  registerProcessTools(server, ctx);
  registerCodegenTools(server, ctx);
  return server;
}

/** A `tools/call` naming a tool the server does not have (registered tools are a field of McpServer the SDK does not expose). */
function unknownToolCall(server: McpServer, body: unknown): { id: unknown; name: string } | undefined {
  const call = body as { method?: unknown; id?: unknown; params?: { name?: unknown } } | undefined;
  if (call?.method !== "tools/call" || typeof call.params?.name !== "string") return undefined;
  const tools = (server as unknown as { _registeredTools: Record<string, unknown> })._registeredTools;
  return Object.hasOwn(tools, call.params.name) ? undefined : { id: call.id, name: call.params.name };
}

const NO_STREAM = { error: "SSE streaming not supported. Please use POST for MCP communication." };

/**
 * `/mcp`: MCP over streamable HTTP, stateless with JSON responses, as the
 * reference serves it: no session id, each POST is its own session (tools/call
 * works without initialize), GET answers 405 (the TypeScript client reads that
 * as "no standalone stream"). Auth is the app's, as for every route.
 */
export function mcpRouter(ctx: ToolContext): Router {
  const router = Router();
  // Reference cap: 4 MiB per request. Parsed here (whatever the content type) and handed over; the transport checks the headers.
  const body = json({ limit: "4mb", type: () => true });

  router.post("/", body, async (req, res) => {
    const server = await createMcpServer(ctx);
    const unknown = unknownToolCall(server, req.body);
    if (unknown) {
      // Reference (go-sdk): a JSON-RPC error, where the TypeScript SDK would answer a tool error.
      res.json({ jsonrpc: "2.0", id: unknown.id, error: { code: -32602, message: `unknown tool "${unknown.name}"` } });
      return;
    }
    const [, { StreamableHTTPServerTransport }] = await loadSdk();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.once("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });

  router.get("/", (_req, res) => void res.status(405).set("Allow", "POST").json(NO_STREAM));
  router.delete("/", (_req, res) => void res.status(405).set("Allow", "POST").json(NO_STREAM));
  return router;
}
