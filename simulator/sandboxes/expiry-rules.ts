import { parseDuration } from "../../src/units.js";
import type { SandboxExpiryRuntime } from "./runtime.js";

/**
 * Sandbox expiry rules (control-plane.md §3.2): `spec.runtime.ttl` (max age),
 * `spec.runtime.expires` (ISO date) and `spec.lifecycle.expirationPolicies`
 * (`ttl-max-age`, `ttl-idle` from the last use, `date`), each with the one
 * action the SDK's types know, `delete`. Ages count from the moment the
 * sandbox was first ready (`__readyAt`, when its create answered; its
 * creation when it has none), so a cold start does not eat them: the SDK's
 * lifecycle test writes and reads a file in a `ttl: "1s"` sandbox right after
 * the create returns. Dates stay absolute. Pure: the sweep (expiry.ts)
 * applies them, and reads render them as `expiresIn`.
 */

export interface Expiry {
  dueMs: number;
  /** Why, for the sandbox's event and the log: e.g. `spec.runtime.ttl 1h`. */
  reason: string;
  action: "delete";
}

export interface ExpiringDoc {
  metadata?: { createdAt?: string; updatedAt?: string };
  spec?: {
    runtime?: { ttl?: unknown; expires?: unknown };
    lifecycle?: { expirationPolicies?: { type?: unknown; value?: unknown; action?: unknown }[]; terminatedRetention?: unknown } | null;
  };
  terminatedAt?: string;
  lastUsedAt?: string;
  /** When the sandbox was first ready (sandboxes/status.ts); absent before, and for records-only sandboxes. */
  __readyAt?: string;
}

/** How long an expired sandbox's TERMINATED record stays visible: spec.lifecycle.terminatedRetention, default 5m (control-plane.md §3.2). */
export function terminatedRetentionMs(doc: ExpiringDoc): number {
  return ttlMs(doc.spec?.lifecycle?.terminatedRetention) ?? 5 * 60_000;
}

/** `30m`, `24h`, `7d`, `2w` (weeks: the control plane's unit) → ms; undefined when unreadable. */
export function ttlMs(value: unknown): number | undefined {
  if (typeof value !== "string") return undefined;
  return memo(ttls, value, parseTtl);
}

function parseTtl(value: string): number | undefined {
  if (value.trim() === "") return undefined;
  const weeks = /^(\d+)w$/.exec(value.trim());
  if (weeks) return Number(weeks[1]) * 7 * 86_400_000;
  try {
    return parseDuration(value, ["s", "m", "h", "d"]);
  } catch {
    return undefined;
  }
}

export function dateMs(value: unknown): number | undefined {
  if (typeof value !== "string") return undefined;
  return memo(dates, value, (text) => {
    const ms = Date.parse(text);
    return Number.isFinite(ms) ? ms : undefined;
  });
}

/**
 * Parsed durations and dates by their text: a sandbox with an expiry rule
 * is checked twice on every GET (the expiry on read, then expiresIn) from the
 * same few strings (its dates and rules). Bounded: cleared when full.
 */
const ttls = new Map<string, number | undefined>();
const dates = new Map<string, number | undefined>();
const MEMO_SIZE = 4096;

function memo(cache: Map<string, number | undefined>, text: string, parse: (text: string) => number | undefined): number | undefined {
  if (cache.has(text)) return cache.get(text);
  const value = parse(text);
  if (cache.size >= MEMO_SIZE) cache.clear();
  cache.set(text, value);
  return value;
}

/** Whether a document names any expiry rule: most sandboxes have none, and their reads (every GET) parse no dates. */
function hasRules(doc: ExpiringDoc): boolean {
  const runtime = doc.spec?.runtime;
  return runtime?.ttl != null || runtime?.expires != null || (doc.spec?.lifecycle?.expirationPolicies?.length ?? 0) > 0;
}

/**
 * The earliest expiry of a sandbox, or undefined when nothing limits its
 * life. `lastUsedMs` is when it last served a request (ttl-idle); becoming
 * ready or its last update counts as a use.
 */
export function expiryOf(doc: ExpiringDoc, lastUsedMs?: number): Expiry | undefined {
  if (!hasRules(doc)) return undefined;
  const created = dateMs(doc.__readyAt) ?? dateMs(doc.metadata?.createdAt) ?? 0;
  const used = Math.max(created, dateMs(doc.metadata?.updatedAt) ?? 0, lastUsedMs ?? 0);
  // Reasons are written for the earliest rule only: reads (expiresIn) need only its due time.
  let due: { dueMs: number; reason: () => string } | undefined;
  const consider = (dueMs: number, reason: () => string) => {
    if (!due || dueMs < due.dueMs) due = { dueMs, reason };
  };
  const ttl = ttlMs(doc.spec?.runtime?.ttl);
  if (ttl !== undefined) consider(created + ttl, () => `spec.runtime.ttl ${String(doc.spec?.runtime?.ttl)} reached`);
  const expires = dateMs(doc.spec?.runtime?.expires);
  if (expires !== undefined) consider(expires, () => `spec.runtime.expires ${String(doc.spec?.runtime?.expires)} reached`);
  for (const policy of doc.spec?.lifecycle?.expirationPolicies ?? []) {
    if (policy.action !== undefined && policy.action !== "delete") continue; // the only action the SDK's types name
    const what = () => `expiration policy ${String(policy.type)} ${String(policy.value)}`;
    if (policy.type === "ttl-max-age") {
      const ms = ttlMs(policy.value);
      if (ms !== undefined) consider(created + ms, () => `${what()} reached`);
    } else if (policy.type === "ttl-idle") {
      const ms = ttlMs(policy.value);
      if (ms !== undefined) consider(used + ms, () => `${what()}: idle since ${new Date(used).toISOString()}`);
    } else if (policy.type === "date") {
      const at = dateMs(policy.value);
      if (at !== undefined) consider(at, () => `${what()} reached`);
    }
  }
  if (!due) return undefined;
  const why = due.reason;
  return {
    dueMs: due.dueMs,
    action: "delete",
    get reason() {
      return why();
    },
  };
}

/** A sandbox's earliest expiry, its last use being the latest of the proxy's record (this process) and the stored lastUsedAt. */
export function sandboxExpiry(
  deps: { sandboxes: Pick<SandboxExpiryRuntime, "lastUsedMs"> },
  workspace: string,
  name: string,
  doc: ExpiringDoc,
): Expiry | undefined {
  if (!hasRules(doc)) return undefined;
  const lastUsed = Math.max(deps.sandboxes.lastUsedMs(workspace, name), dateMs(doc.lastUsedAt) ?? 0);
  return expiryOf(doc, lastUsed || undefined);
}
