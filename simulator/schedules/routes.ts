import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import type { Page } from "../../src/pagination.js";
import { toIso as iso } from "../../src/clock.js";
import type { Operation, OpContext } from "../http/operation.js";
import { showSecrets } from "../resources/crud.js";
import type { ListShape } from "../resources/listing.js";
import { publicView, maskMap } from "../resources/render.js";
import type { Awaitable, ScheduleBackend, ScheduleEntry } from "./backend.js";
import type { SimClock } from "../clock.js";
import type { ResourceStore } from "../store/resources.js";

const InputSchema = z.strictObject({
  command: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  keepAlive: z.boolean().optional(),
  name: z.string().optional(),
  timeout: z.number().int().min(0).optional(),
  workingDir: z.string().optional(),
});

const EntryBody = z.strictObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,63}$/, "letters, digits, '_' and '-', at most 63")
    .optional(),
  type: z.enum(["cron", "at", "sleep"]),
  value: z.string().min(1),
  input: InputSchema.optional(),
  maxExecutions: z.number().int().min(1).max(10_000).optional(),
  // read-only fields the SDK may send back
  sandbox: z.string().optional(),
  createdAt: z.string().optional(),
});

function requireSandbox(deps: ScheduleRouteDeps, ctx: OpContext): string {
  const name = ctx.params.sandboxName!;
  if (!deps.resources.get(ctx.workspace, "sandbox", name)) throw errors.notFound(`sandbox "${name}" not found`);
  return name;
}

/** Every schedule env value is masked unless an admin passes show_secrets=true. */
function renderEntry(entry: ScheduleEntry, show: boolean): ScheduleEntry {
  const view = publicView(entry);
  return view.input?.env ? { ...view, input: { ...view.input, env: maskMap(view.input.env, show) as Record<string, string> } } : view;
}

/** Applies `f` at once to a plain value, after it settles to a promise: local answers stay synchronous. */
function then<T, R>(value: Awaitable<T>, f: (v: T) => R): Awaitable<R> {
  return value instanceof Promise ? value.then(f) : f(value);
}

/** What the schedule routes read besides their backend: the sandbox records and the clock (metrics' window). */
export interface ScheduleRouteDeps {
  resources: ResourceStore;
  clock: SimClock;
}

/**
 * The schedule operations, over the backend the composition root chose: each sandbox's agent when the
 * simulator runs real sandboxes (AgentScheduleBackend), else the records-only LocalScheduleBackend.
 */
export function scheduleOperations(backend: ScheduleBackend, deps: ScheduleRouteDeps): Operation[] {
  const renderList = (ctx: OpContext, result: ScheduleEntry[] | Page<ScheduleEntry>) => {
    const show = showSecrets(ctx);
    return Array.isArray(result) ? result.map((e) => renderEntry(e, show)) : { ...result, data: result.data.map((e) => renderEntry(e, show)) };
  };
  const sandboxFilter = (ctx: OpContext) => (typeof ctx.query.sandbox === "string" && ctx.query.sandbox !== "" ? ctx.query.sandbox : null);
  const listEntries = (ctx: OpContext, parent: string | null, shape: ListShape) => then(backend.list(ctx, parent, shape), (r) => renderList(ctx, r));
  const listExecutions = (ctx: OpContext, parent: string | null) => backend.executions(ctx, parent);
  const one = (ctx: OpContext, entry: Awaitable<ScheduleEntry>, show = false) => then(entry, (e) => renderEntry(e, show));
  return [
    {
      id: "listSandboxSchedules",
      method: "get",
      path: "/sandboxes/:sandboxName/schedules",
      scope: "sandboxes:get",
      handler: (ctx) => listEntries(ctx, requireSandbox(deps, ctx), "versioned"),
    },
    {
      id: "createSandboxSchedule",
      method: "post",
      path: "/sandboxes/:sandboxName/schedules",
      scope: "sandboxes:update",
      handler: (ctx) => one(ctx, backend.create(ctx, requireSandbox(deps, ctx), parse(EntryBody, ctx.body ?? {}, "body"))),
    },
    {
      id: "getSandboxSchedule",
      method: "get",
      path: "/sandboxes/:sandboxName/schedules/:scheduleId",
      scope: "sandboxes:get",
      handler: (ctx) => one(ctx, backend.get(ctx, requireSandbox(deps, ctx), ctx.params.scheduleId!), showSecrets(ctx)),
    },
    {
      id: "updateSandboxSchedule",
      method: "put",
      path: "/sandboxes/:sandboxName/schedules/:scheduleId",
      scope: "sandboxes:update",
      handler: (ctx) => one(ctx, backend.update(ctx, requireSandbox(deps, ctx), ctx.params.scheduleId!, parse(EntryBody, ctx.body ?? {}, "body"))),
    },
    {
      id: "deleteSandboxSchedule",
      method: "delete",
      path: "/sandboxes/:sandboxName/schedules/:scheduleId",
      scope: "sandboxes:update",
      handler: (ctx) => one(ctx, backend.delete(ctx, requireSandbox(deps, ctx), ctx.params.scheduleId!)),
    },
    {
      id: "listSandboxScheduleExecutions",
      method: "get",
      path: "/sandboxes/:sandboxName/schedule-executions",
      scope: "sandboxes:get",
      handler: (ctx) => listExecutions(ctx, requireSandbox(deps, ctx)),
    },
    { id: "getSandboxScheduleMetrics", method: "get", path: "/schedules/metrics", scope: "sandboxes:list", handler: (ctx) => metrics(deps, backend)(ctx) },
    { id: "listSchedules", method: "get", path: "/schedules", scope: "sandboxes:list", handler: (ctx) => listEntries(ctx, sandboxFilter(ctx), "paged") },
    {
      id: "listScheduleExecutions",
      method: "get",
      path: "/schedule-executions",
      scope: "sandboxes:list",
      handler: (ctx) => listExecutions(ctx, sandboxFilter(ctx)),
    },
  ];
}

/** Counts over a window (default the last 24 h, at most 7 days back), minutes in UTC. */
function metrics(deps: ScheduleRouteDeps, backend: ScheduleBackend) {
  return (ctx: OpContext) => {
    const now = deps.clock.now();
    const minute = (ms: number) => Math.floor(ms / 60_000) * 60_000;
    const at = (name: "since" | "until") =>
      typeof ctx.query[name] === "string" && !Number.isNaN(Date.parse(ctx.query[name] as string)) ? minute(Date.parse(ctx.query[name] as string)) : undefined;
    const until = at("until") ?? minute(now) + 60_000;
    const since = at("since") ?? until - 24 * 3_600_000;
    if (since < minute(now) - 7 * 24 * 3_600_000) throw errors.badRequest("since: at most 7 days back");
    if (since >= until) throw errors.badRequest("since: must be before until");
    return then(backend.metrics(ctx, since, until), (counts) => ({ since: iso(since), until: iso(until), ...counts }));
  };
}
