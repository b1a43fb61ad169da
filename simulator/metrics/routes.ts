import type { IncomingMessage } from "node:http";
import express, { type Request, type Router } from "express";
import { z } from "zod";
import type { CursorCodec } from "../../src/cursor.js";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { GROUP_BY_VALUES } from "./dimensions.js";
import { parseUsageEvents } from "./ingest.js";
import { parseUsageEventsText } from "./ingest-text.js";
import { parseMetricsQuery, parseWindow, type MetricsQuery } from "./params.js";
import { MetricsQueries, usd, type Scope } from "./query.js";
import type { UsageMeter } from "./meter.js";
import type { UsageStore } from "./usage-store.js";

/** What the metrics API needs to know about the caller (the simulator's auth answers it). */
export interface MetricsAccess {
  /** The caller's account; a request for another account is 403. */
  accountId?: string;
  isAccountAdmin: boolean;
  /** Workspaces of this account the caller may see: all of them for an account admin, its memberships otherwise. */
  workspaces: readonly string[];
}

export interface MetricsRouterDeps {
  usage: UsageStore;
  /** Cursor expiry follows the codec's own `now` (build it from the simulator's clock). */
  cursors: CursorCodec;
  /** Throws the catalogue's 401 for a missing or bad credential. */
  access: (req: Request) => MetricsAccess;
  /** Open spans of live resources, recorded up to now before each answer. */
  meter?: UsageMeter;
}

// The reference service answers these with exactly this message.
const accessDenied = () => errors.forbidden("Access denied");

/**
 * GET / (the metrics), /enums/group-by, /enums/resource-types; mounted at
 * /v0/accounts/:accountId/metrics (the router reads :accountId, hence mergeParams).
 */
export function createMetricsRouter(deps: MetricsRouterDeps): Router {
  const router = express.Router({ mergeParams: true });
  const queries = new MetricsQueries(deps.usage);

  const caller = (req: Request): MetricsAccess => {
    const access = deps.access(req);
    const accountId = (req.params as Record<string, string | undefined>).accountId;
    if (accountId !== undefined && access.accountId !== accountId) throw accessDenied();
    return access;
  };

  router.get("/", (req, res) => {
    const access = caller(req);
    const q = parseMetricsQuery(req.query);
    if (!access.isAccountAdmin && (q.workspace !== undefined || q.groupBy.includes("workspace"))) throw accessDenied();
    const visible = [...access.workspaces].sort();
    const scope: Scope = { workspaces: q.workspace === undefined ? visible : visible.filter((w) => w === q.workspace) };
    const binding = cursorBinding(q, access, visible);
    const position = q.cursor ? deps.cursors.decode<string[]>(q.cursor, binding, "query.cursor") : undefined;
    deps.meter?.flush();
    const page = queries.run(q, scope, position);
    const withUsage = q.groupBy.includes("billing_dimension");
    res.json({
      startTime: new Date(q.start).toISOString(),
      endTime: new Date(q.end).toISOString(),
      resolution: q.resolution,
      summary: withUsage
        ? { totalCost: usd(page.totalCostNanos), totalUsage: Math.round(page.totalUsage * 1e6) / 1e6 }
        : { totalCost: usd(page.totalCostNanos) },
      data: page.entries,
      meta: {
        hasMore: page.nextPosition !== undefined,
        nextCursor: page.nextPosition ? deps.cursors.encode(page.nextPosition, binding) : "",
        // Groups matching the whole query (every page), as the seed's meta.total.
        total: page.totalGroups,
      },
    });
  });

  router.get("/enums/group-by", (req, res) => {
    caller(req);
    res.json({ values: [...GROUP_BY_VALUES] });
  });

  router.get("/enums/resource-types", (req, res) => {
    const access = caller(req);
    deps.meter?.flush();
    res.json({ values: queries.resourceTypes(parseWindow(req.query), { workspaces: access.workspaces }) });
  });

  return router;
}

/**
 * The cursor is bound to the whole normalized query — window, resolution,
 * groupBy, every filter — and to who asks (account, role, visible
 * workspaces). Not to `limit`: the keyset position stays valid for any page size.
 */
function cursorBinding(q: MetricsQuery, access: MetricsAccess, visible: string[]): unknown {
  const { cursor: _cursor, limit: _limit, ...query } = q;
  return { metrics: query, accountId: access.accountId ?? null, admin: access.isAccountAdmin, visible };
}

/** What express.json would decode as utf-8 without inflating: `application/json`, no parameter but charset=utf-8. */
function isPlainJson(req: IncomingMessage): boolean {
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding.toLowerCase() !== "identity") return false;
  return /^application\/json[ \t]*(;[ \t]*charset=("?)utf-8\2[ \t]*)?$/i.test(req.headers["content-type"] ?? "");
}

const PricesBody = z.record(z.string(), z.number().nonnegative().nullable());

/**
 * Test hooks (mount only with --test-hooks): POST /_sim/usage-events bulk
 * ingest, GET and PUT /_sim/prices (PUT merges `{dimension: usdPerUnit}`,
 * null restores the default). Bodies up to 64 MB (≈ 200,000 events).
 */
export function createMetricsTestHooksRouter(deps: { usage: UsageStore }): Router {
  const router = express.Router();
  const json = express.json({ limit: "64mb" });

  // A plain JSON body (utf-8, not compressed) is read as text and parsed in slices (ingest-text.ts); any other goes through express.json as before.
  const text = express.text({ type: isPlainJson, limit: "64mb" });
  router.post("/_sim/usage-events", text, json, (req, res) => {
    if (typeof req.body === "string") {
      const { events, ts, usage, label } = parseUsageEventsText(req.body);
      res.json({ ingested: deps.usage.recordAt(events, ts, label, usage) });
      return;
    }
    const { events, ts, label } = parseUsageEvents(req.body);
    res.json({ ingested: deps.usage.recordAt(events, ts, label) });
  });
  router.get("/_sim/prices", (_req, res) => {
    res.json({ prices: deps.usage.prices() });
  });
  router.put("/_sim/prices", json, (req, res) => {
    deps.usage.setPrices(parse(PricesBody, req.body ?? {}, "body"));
    res.json({ prices: deps.usage.prices() });
  });
  return router;
}
