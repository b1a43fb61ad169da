import { Router, json, raw, type Request, type Response } from "express";
import { z } from "zod";
import type { Clock } from "../../src/clock.js";
import { parse } from "../../src/http.js";
import { errors } from "../../src/errors.js";
import { execute, KEEP_ALIVE_DISABLED, timeoutsOf } from "./execute.js";
import type { ProcessManager, StartProcessRequest } from "./manager.js";
import { INLINE_OUTPUT_BYTES, LIST_OUTPUT_BYTES, toProcessResponse } from "./response.js";
import { MAX_STDIN_WRITE_BYTES } from "./stdin.js";
import { execStream, followLogs } from "./stream.js";
import { StartProcessSchema } from "./validate.js";

/**
 * The HTTP body of POST /process (the SDK's ProcessRequest): the manager's
 * request plus the waits. `timeout` may be null or negative (reference: then
 * absent); `killAfter` is internal (schedules) and not accepted here.
 */
const ExecBody = StartProcessSchema.omit({ killAfter: true }).extend({
  timeout: z.number().int("must be a whole number of seconds").nullable().optional(),
  waitForCompletion: z.boolean().optional(),
  waitForPorts: z.array(z.number().int().min(1, "ports are 1-65535").max(65535, "ports are 1-65535")).max(64).nullable().optional(),
});

function startRequest(body: z.infer<typeof ExecBody>): StartProcessRequest {
  const { timeout, killAfter } = timeoutsOf(body.timeout, body.keepAlive);
  return {
    command: body.command,
    name: body.name,
    workingDir: body.workingDir,
    env: body.env,
    keepAlive: body.keepAlive,
    timeout,
    killAfter,
    restartOnFailure: body.restartOnFailure,
    maxRestarts: body.maxRestarts,
    stdin: body.stdin,
  };
}

/** The SDK asks for the exec stream with `Accept: text/event-stream` and gets NDJSON (reference §4.5). */
function wantsStream(req: Request): boolean {
  return (req.get("accept") ?? "").includes("text/event-stream");
}

/** Aborted when the client goes away before the answer: a pending wait stops polling. */
function clientGone(res: Response): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** /process routes, wire-compatible with @blaxel/core's sandbox.process (reference §4, §9.6–9.8). */
export function processRouter(manager: ProcessManager, clock: Clock, options: { keepAliveDisabled?: boolean } = {}): Router {
  const router = Router();
  const logMaxBytes = manager.logMaxBytes;
  const body = json({ limit: "1mb", type: () => true });

  router.post("/", body, async (req, res) => {
    const parsed = parse(ExecBody, req.body ?? {}, "body");
    if (parsed.keepAlive && options.keepAliveDisabled) throw errors.badRequest(KEEP_ALIVE_DISABLED);
    const request = startRequest(parsed);
    if (wantsStream(req)) return execStream(req, res, manager, request, logMaxBytes);
    const waits = {
      waitForCompletion: parsed.waitForCompletion,
      waitForPorts: parsed.waitForPorts ?? undefined,
      timeout: request.timeout ?? 0,
      signal: clientGone(res),
    };
    const record = await execute(manager, clock, request, waits);
    if (parsed.waitForCompletion) {
      res.json(toProcessResponse(await manager.describe(record.pid, logMaxBytes)));
      return;
    }
    // Reference: a start that does not wait for the end has no `logs` yet.
    const described = await manager.describe(record.pid, INLINE_OUTPUT_BYTES);
    res.json({ ...toProcessResponse(described), logs: null });
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

  // The SDK's writeStdin: the raw body, whatever its content type, forwarded verbatim (reference §9.8).
  const rawBody = raw({ type: () => true, limit: MAX_STDIN_WRITE_BYTES });
  router.post("/:id/stdin", rawBody, async (req, res) => {
    const data = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    await manager.writeStdin(req.params.id, data);
    res.json({ message: `${data.length} bytes written to stdin`, path: "" });
  });
  router.delete("/:id/stdin", (req, res) => {
    manager.closeStdin(req.params.id);
    res.json({ message: "stdin closed", path: "" });
  });

  return router;
}
