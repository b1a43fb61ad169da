import { randomBytes } from "node:crypto";
import { errors } from "../../src/errors.js";
import { SCHEDULE_PAGE, type Page } from "../../src/pagination.js";
import { listResources, type ListShape } from "../resources/listing.js";
import { keepMaskedSecrets } from "../resources/render.js";
import { toIso as iso } from "../../src/clock.js";
import type { CursorCodec } from "../../src/cursor.js";
import type { Ids } from "../../src/ids.js";
import type { Clock } from "../../src/clock.js";
import type { Db } from "../../src/sqlite.js";
import type { OpContext } from "../http/operation.js";
import type { ResourceStore, StoredResource } from "../store/resources.js";
import { dueFirings, normalizeScheduleValue, type StoredType } from "./parse.js";

/**
 * Where a sandbox's schedules live (the composition root picks one). A simulator with real sandboxes
 * (serveSimulator) delegates to each sandbox's agent
 * (AgentScheduleBackend, agent-backend.ts). LocalScheduleBackend keeps them
 * in the resources table for a records-only simulator (openSimulator without
 * agents: the API conformance tests), simulating each firing as accepted.
 */
export interface ScheduleInput {
  id?: string;
  type: "cron" | "at" | "sleep";
  value: string;
  input?: Record<string, unknown>;
  maxExecutions?: number;
}

export interface ScheduleEntry {
  id: string;
  sandbox: string;
  type: StoredType;
  value: string;
  input: Record<string, unknown>;
  maxExecutions: number;
  createdAt: string;
  /** Last catch-up point (bookkeeping, never rendered). */
  __firedUntilMs?: number;
}

export interface ScheduleExecution {
  id: string;
  scheduleId: string;
  sandbox: string;
  createdAt: string;
  executedAt: string;
  status: "succeeded" | "failed";
  statusCode: number;
  error: string;
  processName: string;
  timeout: number;
}

export interface ScheduleMetricsCounts {
  sandboxes: number;
  schedules: number;
  executions: number;
  executionsByStatus: { succeeded: number; failed: number };
}

/** A value, or a promise of it: the agent-backed backend answers asynchronously. */
export type Awaitable<T> = T | Promise<T>;

/**
 * Everything the routes need; `sandbox` null means every sandbox of the
 * workspace. Paging (cursor, limit, sort, q) comes from ctx.query.
 */
export interface ScheduleBackend {
  list(ctx: OpContext, sandbox: string | null, shape: ListShape): Awaitable<ScheduleEntry[] | Page<ScheduleEntry>>;
  create(ctx: OpContext, sandbox: string, input: ScheduleInput): Awaitable<ScheduleEntry>;
  get(ctx: OpContext, sandbox: string, id: string): Awaitable<ScheduleEntry>;
  update(ctx: OpContext, sandbox: string, id: string, input: ScheduleInput): Awaitable<ScheduleEntry>;
  delete(ctx: OpContext, sandbox: string, id: string): Awaitable<ScheduleEntry>;
  executions(ctx: OpContext, sandbox: string | null): Awaitable<Page<ScheduleExecution>>;
  /** Counts over [sinceMs, untilMs). */
  metrics(ctx: OpContext, sinceMs: number, untilMs: number): Awaitable<ScheduleMetricsCounts>;
}

export const DEFAULT_MAX_EXECUTIONS = 100;
export const SCHEDULE_KIND = "schedule";
export const EXECUTION_KIND = "schedule-execution";

/** What the records-only backend keeps schedules and their executions in (named here, not as a Pick of SimDeps, which holds a backend). */
export interface LocalScheduleDeps {
  db: Db;
  resources: ResourceStore;
  clock: Clock;
  ids: Ids;
  cursors: CursorCodec;
}

export class LocalScheduleBackend implements ScheduleBackend {
  constructor(private readonly deps: LocalScheduleDeps) {}

  list(ctx: OpContext, sandbox: string | null, shape: ListShape): ScheduleEntry[] | Page<ScheduleEntry> {
    this.catchUp(ctx, sandbox);
    // Only stored types filter; other values are ignored (control-plane.md §3.3).
    const type = ctx.query.type === "cron" || ctx.query.type === "at" ? [ctx.query.type] : undefined;
    return listResources(
      this.deps,
      ctx,
      { kind: SCHEDULE_KIND, parent: sandbox, shape, limits: SCHEDULE_PAGE, statuses: type },
      (row) => row.doc as unknown as ScheduleEntry,
    );
  }

  executions(ctx: OpContext, sandbox: string | null): Page<ScheduleExecution> {
    this.catchUp(ctx, sandbox);
    const status = ctx.query.status === "succeeded" || ctx.query.status === "failed" ? [ctx.query.status] : undefined;
    return listResources(
      this.deps,
      ctx,
      {
        kind: EXECUTION_KIND,
        parent: sandbox,
        shape: "paged",
        limits: SCHEDULE_PAGE,
        statuses: status,
        keep: windowFilter(ctx),
        filters: { since: ctx.query.since, until: ctx.query.until, schedule: ctx.query.schedule ?? ctx.query.scheduleId },
      },
      (row) => row.doc as unknown as ScheduleExecution,
    ) as Page<ScheduleExecution>;
  }

  metrics(ctx: OpContext, sinceMs: number, untilMs: number): ScheduleMetricsCounts {
    this.catchUp(ctx, null);
    const schedules = this.deps.resources.list({ workspace: ctx.workspace, kind: SCHEDULE_KIND, parent: null, sort: "createdAt:asc" });
    const executions = this.deps.resources
      .list({ workspace: ctx.workspace, kind: EXECUTION_KIND, parent: null, sort: "createdAt:asc" })
      .filter((e) => e.createdMs >= sinceMs && e.createdMs < untilMs);
    return {
      sandboxes: new Set(schedules.map((s) => s.parent)).size,
      schedules: schedules.length,
      executions: executions.length,
      executionsByStatus: {
        succeeded: executions.filter((e) => e.status === "succeeded").length,
        failed: executions.filter((e) => e.status === "failed").length,
      },
    };
  }

  create(ctx: OpContext, sandbox: string, input: ScheduleInput): ScheduleEntry {
    const now = this.deps.clock.now();
    const { type, value } = normalizeScheduleValue(input.type, input.value, now);
    const entry: ScheduleEntry = {
      id: input.id ?? `sched-${randomBytes(4).toString("hex")}`,
      sandbox,
      type,
      value,
      input: input.input ?? {},
      maxExecutions: input.maxExecutions ?? DEFAULT_MAX_EXECUTIONS,
      createdAt: iso(now),
      __firedUntilMs: now,
    };
    const stored = { workspace: ctx.workspace, kind: SCHEDULE_KIND, parent: sandbox, name: entry.id, createdMs: now, status: type, doc: entry };
    if (!this.deps.resources.tryInsert(stored)) throw errors.conflict(`schedule "${entry.id}" already exists on sandbox "${sandbox}"`);
    return entry;
  }

  get(ctx: OpContext, sandbox: string, id: string): ScheduleEntry {
    this.catchUp(ctx, sandbox);
    return this.#load(ctx, sandbox, id).doc;
  }

  update(ctx: OpContext, sandbox: string, id: string, input: ScheduleInput): ScheduleEntry {
    const item = this.#load(ctx, sandbox, id);
    const { type, value } = normalizeScheduleValue(input.type, input.value, this.deps.clock.now());
    const next = input.input && structuredClone(input.input);
    keepMaskedSecrets(next, item.doc.input); // a masked env value sent back keeps the stored one
    item.doc = { ...item.doc, type, value, input: next ?? item.doc.input, maxExecutions: input.maxExecutions ?? item.doc.maxExecutions };
    item.status = type;
    this.deps.resources.update(item);
    return item.doc;
  }

  delete(ctx: OpContext, sandbox: string, id: string): ScheduleEntry {
    const item = this.#load(ctx, sandbox, id);
    this.deps.resources.delete(ctx.workspace, SCHEDULE_KIND, id, sandbox);
    return item.doc;
  }

  /** Records the executions that fell due up to now (for every sandbox when `sandbox` is null). */
  catchUp(ctx: OpContext, sandbox: string | null): void {
    const { resources, clock } = this.deps;
    const now = clock.now();
    const schedules = resources.list<ScheduleEntry>({ workspace: ctx.workspace, kind: SCHEDULE_KIND, parent: sandbox, sort: "createdAt:asc" });
    this.deps.db.transaction(() => {
      for (const item of schedules) {
        const entry = item.doc;
        const from = entry.__firedUntilMs ?? Date.parse(entry.createdAt);
        if (from >= now) continue;
        const firings = dueFirings(entry.type, entry.value, from, now, entry.maxExecutions);
        for (const at of firings) this.#record(ctx, item, at);
        if (entry.type === "at" && firings.length) {
          // A one-off entry is removed once it has fired (control-plane.md §3.3).
          resources.delete(ctx.workspace, SCHEDULE_KIND, item.name, item.parent);
          continue;
        }
        entry.__firedUntilMs = now;
        resources.update(item);
      }
    })();
  }

  /**
   * Records one firing. A records-only simulator has no sandbox-agent to
   * submit to, so the submission is simulated as accepted (statusCode 200).
   */
  #record(ctx: OpContext, schedule: StoredResource<ScheduleEntry>, atMs: number): void {
    const { resources, ids } = this.deps;
    const entry = schedule.doc;
    const id = ids();
    const execution: ScheduleExecution = {
      id,
      scheduleId: entry.id,
      sandbox: entry.sandbox,
      createdAt: iso(atMs),
      executedAt: iso(atMs),
      status: "succeeded",
      statusCode: 200,
      error: "",
      processName: typeof entry.input.name === "string" ? entry.input.name : `${entry.id}-${atMs}`,
      timeout: typeof entry.input.timeout === "number" ? entry.input.timeout : 600,
    };
    resources.insert({
      workspace: ctx.workspace,
      kind: EXECUTION_KIND,
      parent: entry.sandbox,
      name: id,
      createdMs: atMs,
      status: "succeeded",
      doc: execution,
    });
    // maxExecutions: recording beyond the cap deletes the oldest record of this schedule.
    const mine = resources
      .list<ScheduleExecution>({ workspace: ctx.workspace, kind: EXECUTION_KIND, parent: entry.sandbox, sort: "createdAt:asc" })
      .filter((e) => e.doc.scheduleId === entry.id);
    for (const old of mine.slice(0, Math.max(0, mine.length - entry.maxExecutions))) resources.delete(ctx.workspace, EXECUTION_KIND, old.name, old.parent);
  }

  #load(ctx: OpContext, sandbox: string, id: string): StoredResource<ScheduleEntry> {
    const item = this.deps.resources.get<ScheduleEntry>(ctx.workspace, SCHEDULE_KIND, id, sandbox);
    if (!item) throw errors.notFound(`schedule "${id}" not found on sandbox "${sandbox}"`);
    return item;
  }
}

/** `since`/`until` (RFC 3339) and `schedule`/`scheduleId` filters of execution lists. */
function windowFilter(ctx: OpContext): (item: StoredResource) => boolean {
  const since = typeof ctx.query.since === "string" ? Date.parse(ctx.query.since) : NaN;
  const until = typeof ctx.query.until === "string" ? Date.parse(ctx.query.until) : NaN;
  const schedule = typeof ctx.query.schedule === "string" ? ctx.query.schedule : typeof ctx.query.scheduleId === "string" ? ctx.query.scheduleId : undefined;
  return (item) =>
    (Number.isNaN(since) || item.createdMs >= since) &&
    (Number.isNaN(until) || item.createdMs < until) &&
    (!schedule || (item.doc as unknown as ScheduleExecution).scheduleId === schedule);
}
