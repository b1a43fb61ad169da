import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { SCHEDULE_PAGE } from "../../src/pagination.js";
import { iso } from "../clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { showSecrets } from "../resources/crud.js";
import { listResources, type ListShape } from "../resources/listing.js";
import { publicView, maskMap } from "../resources/render.js";
import type { StoredResource } from "../store/resources.js";
import { EXECUTION_KIND, LocalScheduleBackend, SCHEDULE_KIND, type ScheduleBackend, type ScheduleEntry, type ScheduleExecution } from "./backend.js";

const InputSchema = z.strictObject({
  command: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  keepAlive: z.boolean().optional(),
  name: z.string().optional(),
  timeout: z.number().int().min(0).optional(),
  workingDir: z.string().optional(),
});

const EntryBody = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_-]{1,63}$/, "letters, digits, '_' and '-', at most 63").optional(),
  type: z.enum(["cron", "at", "sleep"]),
  value: z.string().min(1),
  input: InputSchema.optional(),
  maxExecutions: z.number().int().min(1).max(10_000).optional(),
  // read-only fields the SDK may send back
  sandbox: z.string().optional(),
  createdAt: z.string().optional(),
});

function requireSandbox(ctx: OpContext): string {
  const name = ctx.params.sandboxName!;
  if (!ctx.deps.resources.get(ctx.workspace, "sandbox", name)) throw errors.notFound(`sandbox "${name}" not found`);
  return name;
}

/** Every schedule env value is masked unless an admin passes show_secrets=true. */
function renderEntry(entry: ScheduleEntry, show: boolean): ScheduleEntry {
  const view = publicView(entry);
  return view.input?.env ? { ...view, input: { ...view.input, env: maskMap(view.input.env, show) as Record<string, string> } } : view;
}

function typeFilter(value: unknown): string[] | undefined {
  // Only stored types filter; other values are ignored (control-plane.md §3.3).
  return value === "cron" || value === "at" ? [value] : undefined;
}

function windowFilter(ctx: OpContext): (item: StoredResource) => boolean {
  const since = typeof ctx.query.since === "string" ? Date.parse(ctx.query.since) : NaN;
  const until = typeof ctx.query.until === "string" ? Date.parse(ctx.query.until) : NaN;
  const schedule = typeof ctx.query.schedule === "string" ? ctx.query.schedule : typeof ctx.query.scheduleId === "string" ? ctx.query.scheduleId : undefined;
  return (item) => (Number.isNaN(since) || item.createdMs >= since) && (Number.isNaN(until) || item.createdMs < until) && (!schedule || (item.doc as unknown as ScheduleExecution).scheduleId === schedule);
}

export function scheduleOperations(backend: ScheduleBackend = new LocalScheduleBackend()): Operation[] {
  const listEntries = (ctx: OpContext, parent: string | null, shape: ListShape) => {
    backend.catchUp(ctx, parent);
    const show = showSecrets(ctx);
    const sandbox = parent ?? (typeof ctx.query.sandbox === "string" ? ctx.query.sandbox : undefined);
    return listResources(ctx, { kind: SCHEDULE_KIND, parent: sandbox ?? null, shape, limits: SCHEDULE_PAGE, statuses: typeFilter(ctx.query.type) }, (row) => renderEntry(row.doc as unknown as ScheduleEntry, show));
  };
  const listExecutions = (ctx: OpContext, parent: string | null) => {
    backend.catchUp(ctx, parent);
    const sandbox = parent ?? (typeof ctx.query.sandbox === "string" ? ctx.query.sandbox : undefined);
    const status = ctx.query.status === "succeeded" || ctx.query.status === "failed" ? [ctx.query.status] : undefined;
    return listResources(ctx, { kind: EXECUTION_KIND, parent: sandbox ?? null, shape: "paged", limits: SCHEDULE_PAGE, statuses: status, keep: windowFilter(ctx) }, (row) => row.doc);
  };
  return [
    { id: "listSandboxSchedules", method: "get", path: "/sandboxes/:sandboxName/schedules", scope: "sandboxes:get", handler: (ctx) => listEntries(ctx, requireSandbox(ctx), "versioned") },
    {
      id: "createSandboxSchedule", method: "post", path: "/sandboxes/:sandboxName/schedules", scope: "sandboxes:update",
      handler: (ctx) => renderEntry(backend.create(ctx, requireSandbox(ctx), parse(EntryBody, ctx.body ?? {}, "body")), false),
    },
    { id: "getSandboxSchedule", method: "get", path: "/sandboxes/:sandboxName/schedules/:scheduleId", scope: "sandboxes:get", handler: (ctx) => renderEntry(backend.get(ctx, requireSandbox(ctx), ctx.params.scheduleId!), showSecrets(ctx)) },
    {
      id: "updateSandboxSchedule", method: "put", path: "/sandboxes/:sandboxName/schedules/:scheduleId", scope: "sandboxes:update",
      handler: (ctx) => renderEntry(backend.update(ctx, requireSandbox(ctx), ctx.params.scheduleId!, parse(EntryBody, ctx.body ?? {}, "body")), false),
    },
    { id: "deleteSandboxSchedule", method: "delete", path: "/sandboxes/:sandboxName/schedules/:scheduleId", scope: "sandboxes:update", handler: (ctx) => renderEntry(backend.delete(ctx, requireSandbox(ctx), ctx.params.scheduleId!), false) },
    { id: "listSandboxScheduleExecutions", method: "get", path: "/sandboxes/:sandboxName/schedule-executions", scope: "sandboxes:get", handler: (ctx) => listExecutions(ctx, requireSandbox(ctx)) },
    { id: "getSandboxScheduleMetrics", method: "get", path: "/schedules/metrics", scope: "sandboxes:list", handler: metrics(backend) },
    { id: "listSchedules", method: "get", path: "/schedules", scope: "sandboxes:list", handler: (ctx) => listEntries(ctx, null, "paged") },
    { id: "listScheduleExecutions", method: "get", path: "/schedule-executions", scope: "sandboxes:list", handler: (ctx) => listExecutions(ctx, null) },
  ];
}

/** Counts over a window (default the last 24 h, at most 7 days back), minutes in UTC. */
function metrics(backend: ScheduleBackend) {
  return (ctx: OpContext) => {
    backend.catchUp(ctx, null);
    const now = ctx.deps.clock.now();
    const minute = (ms: number) => Math.floor(ms / 60_000) * 60_000;
    const until = typeof ctx.query.until === "string" && !Number.isNaN(Date.parse(ctx.query.until)) ? minute(Date.parse(ctx.query.until)) : minute(now) + 60_000;
    const since = typeof ctx.query.since === "string" && !Number.isNaN(Date.parse(ctx.query.since)) ? minute(Date.parse(ctx.query.since)) : until - 24 * 3_600_000;
    if (since < minute(now) - 7 * 24 * 3_600_000) throw errors.badRequest("since: at most 7 days back");
    if (since >= until) throw errors.badRequest("since: must be before until");
    const schedules = ctx.deps.resources.list({ workspace: ctx.workspace, kind: SCHEDULE_KIND, parent: null, sort: "createdAt:asc" });
    const executions = ctx.deps.resources.list({ workspace: ctx.workspace, kind: EXECUTION_KIND, parent: null, sort: "createdAt:asc" }).filter((e) => e.createdMs >= since && e.createdMs < until);
    return {
      since: iso(since),
      until: iso(until),
      sandboxes: new Set(schedules.map((s) => s.parent)).size,
      schedules: schedules.length,
      executions: executions.length,
      executionsByStatus: { succeeded: executions.filter((e) => e.status === "succeeded").length, failed: executions.filter((e) => e.status === "failed").length },
    };
  };
}
