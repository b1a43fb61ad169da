import { Router, json } from "express";
import type { ToolContext } from "./context.js";
import { rejectRebinding } from "./rebinding.js";

const NO_STREAM = { error: "SSE streaming not supported. Please use POST for MCP communication." };

/**
 * `/mcp`: MCP over streamable HTTP, stateless with JSON responses, as the
 * reference serves it: no session id, each POST is its own session (tools/call
 * works without initialize), GET answers 405 (the TypeScript client reads that
 * as "no standalone stream"). Auth is the app's, as for every route; a POST
 * on a loopback socket naming another host is refused first, as the
 * reference's transport refuses it.
 */
export function mcpRouter(ctx: ToolContext): Router {
  const router = Router();
  // Reference cap: 4 MiB per request. Parsed here (whatever the content type) and handed over; the transport checks the headers.
  const body = json({ limit: "4mb", type: () => true });

  router.post("/", rejectRebinding(), body, async (req, res) => {
    const { serveMcpPost } = await import("./session.js");
    await serveMcpPost(ctx, req, res);
  });

  router.get("/", (_req, res) => void res.status(405).set("Allow", "POST").json(NO_STREAM));
  router.delete("/", (_req, res) => void res.status(405).set("Allow", "POST").json(NO_STREAM));
  return router;
}
