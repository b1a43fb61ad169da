import { errors } from "../../src/errors.js";
import { parsePageQuery, SCHEDULE_PAGE, type Page } from "../../src/pagination.js";
import { callAgent } from "../agents/client.js";
import type { SandboxAgents } from "../agents/registry.js";
import type { OpContext } from "../http/operation.js";
import { showSecrets } from "../resources/crud.js";
import type { ListShape } from "../resources/listing.js";
import type { ScheduleBackend, ScheduleEntry, ScheduleExecution, ScheduleInput, ScheduleMetricsCounts } from "./backend.js";
import { everything, mergedPage, type AgentPage, type FetchPage } from "./merged-pages.js";
import type { ResourceStore } from "../store/resources.js";
import type { CursorCodec } from "../../src/cursor.js";

/**
 * Schedules kept and executed by each sandbox's own agent: the
 * control plane forwards to the agent's /schedules API with the sandbox's
 * token and maps its records to the control plane's shapes
 * (control-plane.md §3.3). Cross-sandbox lists merge the agents' pages.
 */

/** The agent's execution record (sandbox-agent/schedules/present.ts). */
interface AgentExecution {
  id: string;
  scheduleId: string;
  sandbox: string;
  createdAt: string;
  executedAt?: string;
  completedAt: string | null;
  status: "running" | "succeeded" | "failed" | "skipped";
  statusCode: number;
  exitCode: number | null;
  processName: string;
  timeout: number;
  error: string | null;
  output?: string | null;
  trigger?: string;
  dueAt?: string | null;
}

/** Sandboxes whose agent is gone on purpose: nothing to ask. */
// Archived and deactivated sandboxes have their agent stopped on purpose: cross-sandbox lists leave them out.
const WITHOUT_AGENT = new Set(["TERMINATED", "DELETING", "ARCHIVING", "ARCHIVED", "DEACTIVATING", "DEACTIVATED"]);

/**
 * On the control plane an execution's status is whether the submission was
 * accepted (statusCode 2xx/3xx), not the process outcome; the agent's own
 * outcome stays available as `runStatus`, `exitCode` and `completedAt`.
 */
export function toControlPlaneExecution(e: AgentExecution): ScheduleExecution & Record<string, unknown> {
  const accepted = e.statusCode >= 200 && e.statusCode < 400;
  return {
    id: e.id,
    scheduleId: e.scheduleId,
    sandbox: e.sandbox,
    createdAt: e.createdAt,
    ...(e.executedAt ? { executedAt: e.executedAt } : {}),
    status: accepted ? "succeeded" : "failed",
    statusCode: e.statusCode,
    error: accepted ? "" : (e.error ?? (e.status === "skipped" ? "skipped: the previous run was still in progress" : "not submitted")),
    processName: e.processName,
    timeout: e.timeout,
    runStatus: e.status,
    exitCode: e.exitCode,
    completedAt: e.completedAt,
    trigger: e.trigger,
  } as ScheduleExecution & Record<string, unknown>;
}

export class AgentScheduleBackend implements ScheduleBackend {
  constructor(
    private readonly agents: SandboxAgents,
    private readonly deps: { resources: ResourceStore; cursors: CursorCodec },
  ) {}

  async list(ctx: OpContext, sandbox: string | null, shape: ListShape): Promise<ScheduleEntry[] | Page<ScheduleEntry>> {
    const type = ctx.query.type === "cron" || ctx.query.type === "at" ? ctx.query.type : undefined;
    const show = showSecrets(ctx);
    const sort = parsePageQuery(ctx.query, SCHEDULE_PAGE).sort as "createdAt:desc" | "createdAt:asc";
    const fetch = this.#fetcher<ScheduleEntry>(ctx, "/schedules", { type, sort, show_secrets: show || undefined });
    if (shape === "versioned" && !ctx.paginated && sandbox) return everything(sandbox, fetch);
    return this.#merged(ctx, sandbox, fetch, { list: "schedules", type });
  }

  async executions(ctx: OpContext, sandbox: string | null): Promise<Page<ScheduleExecution>> {
    const status = ctx.query.status === "succeeded" || ctx.query.status === "failed" ? ctx.query.status : undefined;
    const scheduleId =
      typeof ctx.query.schedule === "string" ? ctx.query.schedule : typeof ctx.query.scheduleId === "string" ? ctx.query.scheduleId : undefined;
    const since = typeof ctx.query.since === "string" ? Date.parse(ctx.query.since) : NaN;
    const until = typeof ctx.query.until === "string" ? Date.parse(ctx.query.until) : NaN;
    const sort = parsePageQuery(ctx.query, SCHEDULE_PAGE).sort as "createdAt:desc" | "createdAt:asc";
    const raw = this.#fetcher<AgentExecution>(ctx, "/schedule-executions", { scheduleId, sort });
    const fetch: FetchPage<ScheduleExecution> = async (name, cursor, limit) => {
      const page = await raw(name, cursor, limit);
      return { ...page, data: page.data.map(toControlPlaneExecution) };
    };
    const keep = (e: ScheduleExecution) => {
      const at = Date.parse(e.createdAt);
      return (!status || e.status === status) && (Number.isNaN(since) || at >= since) && (Number.isNaN(until) || at < until);
    };
    return this.#merged(ctx, sandbox, fetch, { list: "executions", status, scheduleId, since: ctx.query.since, until: ctx.query.until }, keep);
  }

  async metrics(ctx: OpContext, sinceMs: number, untilMs: number): Promise<ScheduleMetricsCounts> {
    const counts: ScheduleMetricsCounts = { sandboxes: 0, schedules: 0, executions: 0, executionsByStatus: { succeeded: 0, failed: 0 } };
    await Promise.all(
      this.#sandboxes(ctx, null).map(async (name) => {
        const schedules = await this.#fetcher<ScheduleEntry>(ctx, "/schedules", {})(name, "", 1);
        if (schedules.meta.total > 0) counts.sandboxes++;
        counts.schedules += schedules.meta.total;
        // Newest first: stop at the first execution older than the window.
        const fetch = this.#fetcher<AgentExecution>(ctx, "/schedule-executions", { sort: "createdAt:desc" });
        for (let cursor = ""; ;) {
          const page = await fetch(name, cursor, 100);
          for (const e of page.data.map(toControlPlaneExecution)) {
            const at = Date.parse(e.createdAt);
            if (at < sinceMs) return;
            if (at >= untilMs) continue;
            counts.executions++;
            counts.executionsByStatus[e.status]++;
          }
          if (!page.meta.hasMore || !page.meta.nextCursor) return;
          cursor = page.meta.nextCursor;
        }
      }),
    );
    return counts;
  }

  create(ctx: OpContext, sandbox: string, input: ScheduleInput): Promise<ScheduleEntry> {
    return callAgent(this.agents, ctx.workspace, sandbox, { method: "POST", path: "/schedules", body: writable(input) });
  }

  get(ctx: OpContext, sandbox: string, id: string): Promise<ScheduleEntry> {
    return callAgent(this.agents, ctx.workspace, sandbox, {
      path: `/schedules/${encodeURIComponent(id)}`,
      query: { show_secrets: showSecrets(ctx) || undefined },
    });
  }

  update(ctx: OpContext, sandbox: string, id: string, input: ScheduleInput): Promise<ScheduleEntry> {
    return callAgent(this.agents, ctx.workspace, sandbox, { method: "PUT", path: `/schedules/${encodeURIComponent(id)}`, body: writable(input) });
  }

  delete(ctx: OpContext, sandbox: string, id: string): Promise<ScheduleEntry> {
    return callAgent(this.agents, ctx.workspace, sandbox, { method: "DELETE", path: `/schedules/${encodeURIComponent(id)}` });
  }

  #fetcher<T>(ctx: OpContext, path: string, query: Record<string, string | boolean | undefined>): FetchPage<T> {
    return (sandbox, cursor, limit) =>
      callAgent<AgentPage<T>>(this.agents, ctx.workspace, sandbox, { path, query: { ...query, limit, cursor: cursor || undefined } });
  }

  #merged<T extends { id: string; createdAt: string }>(
    ctx: OpContext,
    sandbox: string | null,
    fetch: FetchPage<T>,
    filters: Record<string, unknown>,
    keep?: (item: T) => boolean,
  ): Promise<Page<T>> {
    const page = parsePageQuery(ctx.query, SCHEDULE_PAGE);
    return mergedPage({
      sandboxes: this.#sandboxes(ctx, sandbox),
      fetch,
      keep,
      limit: page.limit,
      sort: page.sort as "createdAt:desc" | "createdAt:asc",
      cursor: page.cursor,
      cursors: this.deps.cursors,
      binding: { workspace: ctx.workspace, sandbox, sort: page.sort, ...filters },
    });
  }

  /** The sandbox asked for, or every sandbox of the workspace that should have an agent. */
  #sandboxes(ctx: OpContext, sandbox: string | null): string[] {
    if (sandbox !== null) return this.deps.resources.get(ctx.workspace, "sandbox", sandbox) ? [sandbox] : [];
    return this.deps.resources
      .allOfKind(ctx.workspace, ["sandbox"])
      .filter((s) => s.parent === "" && !WITHOUT_AGENT.has(s.status))
      .map((s) => s.name);
  }
}

/** The body the agent takes: the control plane's writable fields. */
function writable(input: ScheduleInput): Record<string, unknown> {
  if (!input.input?.command) throw errors.badRequest("input.command: is required (the sandbox's agent runs it at each firing)");
  return { id: input.id, type: input.type, value: input.value, input: input.input, maxExecutions: input.maxExecutions };
}
