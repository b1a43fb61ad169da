import type { Migration } from "../../src/sqlite.js";
import type { ResourceType } from "./dimensions.js";

/**
 * The usage store's records and tables: what one usage event says, the bounds on its cost and time, and
 * the schema (its migrations). The store that writes and reads them is usage-store.ts.
 */

/** What a usage record says, its time aside. */
export interface UsageFields {
  workspace: string;
  resourceType: ResourceType;
  resourceName: string;
  resourceUuid: string;
  billingDimension: string;
  /** In the dimension's unit: GB-seconds, a count or hours. */
  usage: number;
}

/** One usage record as the simulator reports it. */
export interface UsageEvent extends UsageFields {
  /** Milliseconds since the epoch. */
  ts: number;
}

/** Costs are stored as integer nano-dollars: see docs/simulator-api.md "Account metrics" for the rounding rule. */
export const NANOS_PER_USD = 1e9;
/** One event may not cost more than this: keeps every sum far inside int64 and exact in JS. */
export const MAX_EVENT_COST_NANOS = 1e6 * NANOS_PER_USD;
/** 9999-12-31T23:59:59.999Z, the last instant RFC 3339 can write. */
export const MAX_TS = 253_402_300_799_999;

/**
 * Strings are interned into small integer ids so the event rows (and the sort
 * behind every GROUP BY) stay narrow. Two daily rollups are maintained in the
 * same transaction as the raw events: per resource (serves resource_name /
 * resource_uuid groupings and filters) and per workspace (serves everything
 * else); a query reads whole days from a rollup and only the partial edge
 * days, or hourly windows (≤ 7 d), from the raw events.
 */
export const METRICS_MIGRATIONS: readonly Migration[] = [
  {
    id: "metrics/001-usage",
    sql: `
      CREATE TABLE metrics_workspaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
      CREATE TABLE metrics_resource_types (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
      CREATE TABLE metrics_billing_dimensions (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, type_id INTEGER NOT NULL, unit TEXT NOT NULL);
      CREATE TABLE metrics_resource_names (
        id INTEGER PRIMARY KEY, ws_id INTEGER NOT NULL, type_id INTEGER NOT NULL, name TEXT NOT NULL,
        UNIQUE (ws_id, type_id, name));
      CREATE TABLE metrics_resources (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, rn_id INTEGER NOT NULL);
      CREATE TABLE metrics_usage_events (
        ts INTEGER NOT NULL, ws_id INTEGER NOT NULL, type_id INTEGER NOT NULL, rn_id INTEGER NOT NULL,
        res_id INTEGER NOT NULL, dim_id INTEGER NOT NULL, usage REAL NOT NULL, cost_nanos INTEGER NOT NULL);
      CREATE INDEX metrics_usage_events_ts ON metrics_usage_events (ts);
      CREATE TABLE metrics_daily_resource (
        day INTEGER NOT NULL, res_id INTEGER NOT NULL, dim_id INTEGER NOT NULL,
        ws_id INTEGER NOT NULL, type_id INTEGER NOT NULL, rn_id INTEGER NOT NULL,
        usage REAL NOT NULL, cost_nanos INTEGER NOT NULL,
        PRIMARY KEY (day, res_id, dim_id)) WITHOUT ROWID;
      CREATE TABLE metrics_daily_workspace (
        day INTEGER NOT NULL, ws_id INTEGER NOT NULL, dim_id INTEGER NOT NULL, type_id INTEGER NOT NULL,
        usage REAL NOT NULL, cost_nanos INTEGER NOT NULL,
        PRIMARY KEY (day, ws_id, dim_id)) WITHOUT ROWID;
      CREATE TABLE metrics_price_overrides (dim_id INTEGER PRIMARY KEY, usd_per_unit REAL NOT NULL);
    `,
  },
  {
    // UsageMeter's open spans (a running sandbox, a stored volume): kept beside the events so a
    // simulator restarted on the same --data file carries on metering what is still live.
    id: "metrics/002-open-spans",
    sql: `
      CREATE TABLE metrics_open_spans (
        uuid TEXT NOT NULL, dimension TEXT NOT NULL, workspace TEXT NOT NULL, resource_type TEXT NOT NULL,
        resource_name TEXT NOT NULL, gb REAL, from_ms INTEGER NOT NULL,
        PRIMARY KEY (uuid, dimension)) WITHOUT ROWID;
    `,
  },
];
