import { Router, json, type Request } from "express";
import type { CursorCodec } from "../../src/cursor.js";
import { errors } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { ListExecutionsQuery, ListSchedulesQuery, ScheduleBodySchema } from "./definition.js";
import { presentExecution, presentSchedule } from "./present.js";
import type { ScheduleService } from "./service.js";
import type { ListQuery } from "./schedule-store.js";

export interface ScheduleRoutesOptions {
  cursors: CursorCodec;
  /** show_secrets=true is honoured only when the agent has a token (the request then carried it). */
  tokenRequired: boolean;
}

const DEFAULT_LIMIT = 20;

/** Cursor-paginated `{data, meta: {hasMore, nextCursor, total}}`; the cursor is the last row's seq, bound to the query. */
function page<R extends { seq: number }, T>(
  codec: CursorCodec,
  binding: Record<string, unknown>,
  query: { limit?: number; cursor?: string; sort: string },
  fetch: (q: ListQuery) => { rows: R[]; total: number },
  present: (row: R) => T,
) {
  const limit = query.limit ?? DEFAULT_LIMIT;
  const after = query.cursor ? codec.decode<number>(query.cursor, binding, "cursor") : undefined;
  const { rows, total } = fetch({ sort: query.sort === "createdAt:asc" ? "asc" : "desc", after, limit: limit + 1 });
  const hasMore = rows.length > limit;
  const data = rows.slice(0, limit);
  const nextCursor = hasMore ? codec.encode(data[data.length - 1]!.seq, binding) : "";
  return { data: data.map(present), meta: { hasMore, nextCursor, total } };
}

function showSecrets(req: Request, tokenRequired: boolean): boolean {
  if (!queryBool(req.query.show_secrets)) return false;
  if (!tokenRequired) throw errors.forbidden("show_secrets=true requires the agent to run with --token and the request to carry it");
  return true;
}

/** `/schedules` (CRUD, run now, a schedule's executions). */
export function schedulesRouter(service: ScheduleService, options: ScheduleRoutesOptions): Router {
  const router = Router();
  const body = json({ limit: "1mb", type: () => true });

  router.get("/", (req, res) => {
    const q = parse(ListSchedulesQuery, req.query, "query");
    const secrets = showSecrets(req, options.tokenRequired);
    const binding = { list: "schedules", type: q.type, sort: q.sort };
    res.json(
      page(
        options.cursors,
        binding,
        q,
        (lq) => service.list({ type: q.type }, lq),
        (row) => presentSchedule(row, secrets),
      ),
    );
  });

  router.post("/", body, (req, res) => {
    const secrets = showSecrets(req, options.tokenRequired);
    const def = parse(ScheduleBodySchema, req.body, "body");
    res.json(presentSchedule(service.create(def), secrets));
  });

  router.get("/:id", (req, res) => {
    const secrets = showSecrets(req, options.tokenRequired);
    res.json(presentSchedule(service.get(req.params.id), secrets));
  });

  router.put("/:id", body, (req, res) => {
    const secrets = showSecrets(req, options.tokenRequired);
    const def = parse(ScheduleBodySchema, req.body, "body");
    res.json(presentSchedule(service.replace(req.params.id, def), secrets));
  });

  router.delete("/:id", (req, res) => {
    const secrets = showSecrets(req, options.tokenRequired);
    res.json(presentSchedule(service.delete(req.params.id), secrets));
  });

  router.post("/:id/run", async (req, res) => {
    res.json(presentExecution(await service.runNow(req.params.id)));
  });

  router.get("/:id/executions", (req, res) => {
    const q = parse(ListExecutionsQuery.omit({ scheduleId: true }), req.query, "query");
    const scheduleId = service.withHistory(req.params.id);
    const binding = { list: "executions", scheduleId, status: q.status, sort: q.sort };
    res.json(page(options.cursors, binding, q, (lq) => service.executions({ scheduleId, status: q.status }, lq), presentExecution));
  });

  return router;
}

/** `/schedule-executions`: sandbox-wide, newest first, filters scheduleId and status. */
export function scheduleExecutionsRouter(service: ScheduleService, options: ScheduleRoutesOptions): Router {
  const router = Router();
  router.get("/", (req, res) => {
    const q = parse(ListExecutionsQuery, req.query, "query");
    const binding = { list: "executions", scheduleId: q.scheduleId, status: q.status, sort: q.sort };
    res.json(page(options.cursors, binding, q, (lq) => service.executions({ scheduleId: q.scheduleId, status: q.status }, lq), presentExecution));
  });
  return router;
}
