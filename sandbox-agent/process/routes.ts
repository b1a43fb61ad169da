import { Router, json, type Request, type Response } from "express";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import type { ProcessManager, StartProcessRequest } from "./manager.js";
import { INLINE_OUTPUT_BYTES, LIST_OUTPUT_BYTES, toProcessResponse } from "./response.js";
import { execStream, followLogs } from "./stream.js";
import { StartProcessSchema } from "./validate.js";

/**
 * The HTTP body of POST /process: the manager's request plus the reference's
 * HTTP-only fields. Fields this agent does not implement are refused rather
 * than silently ignored, so nobody relies on a restart or a port wait that
 * never happens.
 */
const ExecBody = StartProcessSchema.extend({
  timeout: z.number().int("must be a whole number of seconds").min(0, "must be 0 (none) or a positive number of seconds").nullable().optional(),
  waitForCompletion: z.boolean().optional(),
  restartOnFailure: z.literal(false, { message: "restartOnFailure is not supported by sandbox-agent" }).optional(),
  maxRestarts: z.number().int().optional(),
  waitForPorts: z.array(z.number().int()).max(0, { message: "waitForPorts is not supported by sandbox-agent" }).optional(),
  stdin: z.literal(false, { message: "stdin is not supported by sandbox-agent" }).optional(),
});

/** SDK default (ProcessRequest.timeout doc): keepAlive without a timeout means 600 s. */
const KEEP_ALIVE_DEFAULT_TIMEOUT = 600;

function startRequest(body: z.infer<typeof ExecBody>): StartProcessRequest {
  const timeout = body.timeout ?? (body.keepAlive ? KEEP_ALIVE_DEFAULT_TIMEOUT : undefined);
  return { command: body.command, name: body.name, workingDir: body.workingDir, env: body.env, timeout, keepAlive: body.keepAlive };
}

/** The SDK asks for the exec stream with `Accept: text/event-stream` and gets NDJSON (reference §4.5). */
function wantsStream(req: Request): boolean {
  return (req.get("accept") ?? "").includes("text/event-stream");
}

/** /process routes, wire-compatible with @blaxel/core's sandbox.process (reference §4). */
export function processRouter(manager: ProcessManager): Router {
  const router = Router();
  const logMaxBytes = manager.logMaxBytes;
  const body = json({ limit: "1mb", type: () => true });

  router.post("/", body, async (req, res) => {
    const parsed = parse(ExecBody, req.body ?? {}, "body");
    const request = startRequest(parsed);
    if (wantsStream(req)) return execStream(req, res, manager, request, logMaxBytes);
    const started = await manager.start(request);
    if (!parsed.waitForCompletion) {
      res.json(toProcessResponse(await manager.describe(started.pid, INLINE_OUTPUT_BYTES)));
      return;
    }
    // Unlike the reference (which answers 422 and leaves the process running),
    // a timeout kills the process, so the wait always ends with a final record.
    await manager.waitForExit(started.pid);
    res.json(toProcessResponse(await manager.describe(started.pid, logMaxBytes)));
  });

  router.get("/", async (_req, res) => {
    res.json((await manager.describeAll(LIST_OUTPUT_BYTES)).map(toProcessResponse));
  });

  router.get("/:id", async (req, res) => {
    res.json(toProcessResponse(await manager.describe(req.params.id, INLINE_OUTPUT_BYTES)));
  });

  router.get("/:id/logs", async (req, res) => {
    res.json(await manager.logs(req.params.id));
  });

  router.get("/:id/logs/stream", async (req, res) => {
    await followLogs(req, res, manager, req.params.id, logMaxBytes);
  });

  router.delete("/:id", async (req, res) => {
    await manager.stop(req.params.id);
    res.json({ message: "Process stopped successfully" });
  });

  const kill = async (req: Request<{ id: string }>, res: Response) => {
    await manager.kill(req.params.id);
    res.json({ message: "Process killed successfully" });
  };
  router.delete("/:id/kill", kill);
  router.post("/:id/kill", kill);

  // The SDK's writeStdin/closeStdin: no process here has a stdin pipe (409, as the reference answers for one started without).
  router.all("/:id/stdin", (req) => {
    if (!manager.get(req.params.id)) throw errors.notFound(`process '${req.params.id}' not found`);
    throw errors.conflict(`process '${req.params.id}' has no stdin: sandbox-agent does not support stdin`);
  });

  return router;
}
