import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Request, Response } from "express";
import { registerCodegenTools } from "./codegen-tools.js";
import type { ToolContext } from "./context.js";
import { registerFsTools } from "./fs-tools.js";
import { registerProcessTools } from "./process-tools.js";

/**
 * One `POST /mcp`, as the reference serves it (§9.11). Loaded by server.ts on
 * the first MCP request: the MCP SDK and the tools cost every agent ~7 MB of
 * heap, and most sandboxes never speak MCP.
 */
/** The reference's server identity and capabilities (§9.11). */
export function createMcpServer(ctx: ToolContext): McpServer {
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

/** Serves one parsed `POST /mcp`: stateless, JSON responses, a server and transport of its own. */
export async function serveMcpPost(ctx: ToolContext, req: Request, res: Response): Promise<void> {
  const server = createMcpServer(ctx);
  const unknown = unknownToolCall(server, req.body);
  if (unknown) {
    // Reference (go-sdk): a JSON-RPC error, where the TypeScript SDK would answer a tool error.
    res.json({ jsonrpc: "2.0", id: unknown.id, error: { code: -32602, message: `unknown tool "${unknown.name}"` } });
    return;
  }
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.once("close", () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
}
