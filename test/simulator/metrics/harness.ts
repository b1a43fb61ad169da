import express from "express";
import { FakeClock } from "../../../src/clock.js";
import { CursorCodec } from "../../../src/cursor.js";
import { errors } from "../../../src/errors.js";
import { errorMiddleware } from "../../../src/http.js";
import { silentLogger } from "../../../src/logging.js";
import { openDatabase } from "../../../src/sqlite.js";
import { createMetricsRouter, createMetricsTestHooksRouter, type MetricsAccess } from "../../../simulator/metrics/routes.js";
import { UsageStore, type UsageEvent } from "../../../simulator/metrics/usage-store.js";

export const ACCOUNT = "acc-1";
export const WORKSPACES = ["ws-a", "ws-b", "ws-c"];

/**
 * Callers, chosen by bearer token: "admin" administers ACCOUNT (sees every
 * workspace), "member-<ws>" belongs to that one workspace only.
 */
export function stubAccess(req: express.Request): MetricsAccess {
  const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
  if (token === "admin") return { accountId: ACCOUNT, isAccountAdmin: true, workspaces: WORKSPACES };
  if (token?.startsWith("member-")) return { accountId: ACCOUNT, isAccountAdmin: false, workspaces: [token.slice("member-".length)] };
  throw errors.unauthorized();
}

/** The metrics routers in a minimal express app, rendered like the simulator renders errors. */
export function metricsApp(clock = new FakeClock("2026-06-01T00:00:00Z")) {
  const db = openDatabase(":memory:");
  const usage = new UsageStore(db);
  const cursors = new CursorCodec({ now: () => clock.now() });
  const app = express();
  app.use(createMetricsTestHooksRouter({ usage }));
  app.use("/v0/accounts/:accountId/metrics", createMetricsRouter({ usage, cursors, access: stubAccess }));
  app.use(errorMiddleware((e) => ({ error: e.code, code: e.status, message: e.message }), silentLogger()));
  return { app, usage, clock, db };
}

/** One usage event as the hook receives it: a 1 h sandbox of ws-a at 10:00 on 2026-04-01, with `over` applied. */
export function wireEvent(over: Partial<WireEvent> = {}): WireEvent {
  return {
    timestamp: "2026-04-01T10:00:00Z",
    workspace: "ws-a",
    resourceType: "sandbox",
    resourceName: "box",
    resourceUuid: "u-box",
    billingDimension: "sandbox_compute_runtime_gbs",
    usage: 3600,
    ...over,
  };
}

/** Deterministic PRNG (mulberry32) so generated histories are reproducible. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface WireEvent {
  timestamp: string;
  workspace: string;
  resourceType: UsageEvent["resourceType"];
  resourceName: string;
  resourceUuid: string;
  billingDimension: string;
  usage: number;
}

const KINDS: Array<[UsageEvent["resourceType"], string[]]> = [
  ["sandbox", ["sandbox_compute_runtime_gbs", "sandbox_image_storage_gbs", "sandbox_snapshot_storage_gbs"]],
  ["agent", ["agent_compute_runtime_gbs", "agent_async_requests_count"]],
  ["job", ["job_compute_runtime_gbs"]],
  ["volume", ["volume_storage_gbs"]],
  ["custom_domain", ["custom_domain_active_time_hours"]],
];

/** `n` random events in [from, to) over `resources` resources spread across WORKSPACES. */
export function randomEvents(n: number, from: string, to: string, resources = 12, seed = 1): WireEvent[] {
  const r = rng(seed);
  const a = Date.parse(from);
  const span = Date.parse(to) - a;
  const res = Array.from({ length: resources }, (_, i) => {
    const [type, dims] = KINDS[i % KINDS.length]!;
    // From 16 resources on, uuids i and i+15 share workspace, type and name (deleted and re-created).
    return { type, dims, ws: WORKSPACES[i % WORKSPACES.length]!, name: `${type}-${i % 15}`, uuid: `uuid-${String(i).padStart(4, "0")}` };
  });
  return Array.from({ length: n }, () => {
    const x = res[Math.floor(r() * res.length)]!;
    return {
      timestamp: new Date(a + Math.floor(r() * span)).toISOString(),
      workspace: x.ws,
      resourceType: x.type,
      resourceName: x.name,
      resourceUuid: x.uuid,
      billingDimension: x.dims[Math.floor(r() * x.dims.length)]!,
      usage: Math.round(r() * 5_000_000) / 1000,
    };
  });
}
