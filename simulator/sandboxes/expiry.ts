import { parseDuration } from "../../src/units.js";
import { iso } from "../clock.js";
import type { SimDeps } from "../deps.js";
import { recordStatus } from "../agents/sandbox-status.js";
import { unmeterResource } from "../resources/usage.js";
import { sandboxKind } from "../resources/kinds/sandbox.js";

/**
 * Sandbox expiry (control-plane.md §3.2): `spec.runtime.ttl` (max age from
 * creation), `spec.runtime.expires` (ISO date) and
 * `spec.lifecycle.expirationPolicies` (`ttl-max-age` from creation,
 * `ttl-idle` from the last use, `date`), each with the one action the SDK's
 * types know, `delete`. Due times are read on the simulator clock, so the
 * test hooks' clock moves expire sandboxes too.
 */

export interface Expiry {
  dueMs: number;
  /** Why, for the sandbox's event and the log: e.g. `spec.runtime.ttl 1h`. */
  reason: string;
  action: "delete";
}

interface ExpiringDoc {
  metadata?: { createdAt?: string; updatedAt?: string };
  spec?: {
    runtime?: { ttl?: unknown; expires?: unknown };
    lifecycle?: { expirationPolicies?: { type?: unknown; value?: unknown; action?: unknown }[]; terminatedRetention?: unknown } | null;
  };
  terminatedAt?: string;
  lastUsedAt?: string;
}

/** How long an expired sandbox's TERMINATED record stays visible: spec.lifecycle.terminatedRetention, default 5m (control-plane.md §3.2). */
export function terminatedRetentionMs(doc: ExpiringDoc): number {
  return ttlMs(doc.spec?.lifecycle?.terminatedRetention) ?? 5 * 60_000;
}

/** `30m`, `24h`, `7d`, `2w` (weeks: the control plane's unit) → ms; undefined when unreadable. */
export function ttlMs(value: unknown): number | undefined {
  if (typeof value !== "string" || value.trim() === "") return undefined;
  const weeks = /^(\d+)w$/.exec(value.trim());
  if (weeks) return Number(weeks[1]) * 7 * 86_400_000;
  try {
    return parseDuration(value, ["s", "m", "h", "d"]);
  } catch {
    return undefined;
  }
}

const dateMs = (value: unknown): number | undefined => (typeof value === "string" && Number.isFinite(Date.parse(value)) ? Date.parse(value) : undefined);

/**
 * The earliest expiry of a sandbox, or undefined when nothing limits its
 * life. `lastUsedMs` is when it last served a request (ttl-idle); creation
 * or its last update counts as a use.
 */
export function expiryOf(doc: ExpiringDoc, lastUsedMs?: number): Expiry | undefined {
  const created = dateMs(doc.metadata?.createdAt) ?? 0;
  const used = Math.max(created, dateMs(doc.metadata?.updatedAt) ?? 0, lastUsedMs ?? 0);
  const candidates: Expiry[] = [];
  const ttl = ttlMs(doc.spec?.runtime?.ttl);
  if (ttl !== undefined) candidates.push({ dueMs: created + ttl, reason: `spec.runtime.ttl ${String(doc.spec?.runtime?.ttl)} reached`, action: "delete" });
  const expires = dateMs(doc.spec?.runtime?.expires);
  if (expires !== undefined) candidates.push({ dueMs: expires, reason: `spec.runtime.expires ${String(doc.spec?.runtime?.expires)} reached`, action: "delete" });
  for (const policy of doc.spec?.lifecycle?.expirationPolicies ?? []) {
    if (policy.action !== undefined && policy.action !== "delete") continue; // the only action the SDK's types name
    const what = `expiration policy ${String(policy.type)} ${String(policy.value)}`;
    if (policy.type === "ttl-max-age") {
      const ms = ttlMs(policy.value);
      if (ms !== undefined) candidates.push({ dueMs: created + ms, reason: `${what} reached`, action: "delete" });
    } else if (policy.type === "ttl-idle") {
      const ms = ttlMs(policy.value);
      if (ms !== undefined) candidates.push({ dueMs: used + ms, reason: `${what}: idle since ${new Date(used).toISOString()}`, action: "delete" });
    } else if (policy.type === "date") {
      const at = dateMs(policy.value);
      if (at !== undefined) candidates.push({ dueMs: at, reason: `${what} reached`, action: "delete" });
    }
  }
  return candidates.sort((a, b) => a.dueMs - b.dueMs)[0];
}

/**
 * Applies every expiry that is due: the sandbox records a DELETING event
 * saying which limit was reached, its agent is stopped and its files retired
 * through the same code as DELETE /sandboxes/{name} (SandboxAgents.retire),
 * its children go, and the record stays TERMINATED (hidden from lists unless
 * ?showTerminated=true) with those events for its terminatedRetention, then
 * goes too. A new sandbox may take the name at once (dropTerminated).
 * Returns what expired.
 */
export function expireDueSandboxes(deps: SimDeps): { workspace: string; sandbox: string; reason: string }[] {
  const now = deps.clock.now();
  const expired: { workspace: string; sandbox: string; reason: string }[] = [];
  for (const ws of deps.accounts.allWorkspaces()) {
    for (const item of deps.resources.allOfKind(ws.name, ["sandbox"])) {
      if (item.parent !== "" || item.status === "DELETING") continue;
      if (item.status === "TERMINATED") {
        const doc = item.doc as ExpiringDoc;
        const since = doc.terminatedAt ? Date.parse(doc.terminatedAt) : now;
        if (since + terminatedRetentionMs(doc) <= now) deps.resources.delete(ws.name, "sandbox", item.name);
        continue;
      }
      const recorded = dateMs((item.doc as ExpiringDoc).lastUsedAt);
      const expiry = expiryOf(item.doc as ExpiringDoc, Math.max(deps.agents?.lastUsedMs(ws.name, item.name) ?? 0, recorded ?? 0) || undefined);
      if (!expiry || expiry.dueMs > now) continue;
      recordStatus(deps, ws.name, item.name, "DELETING", `expired: ${expiry.reason}; deleting the sandbox`);
      deps.agents?.retire(ws.name, item.name, (err) => deps.logger.warn({ workspace: ws.name, sandbox: item.name, err: err.message }, "expired sandbox agent cleanup failed"));
      if (sandboxKind.children?.length) deps.resources.deleteChildren(ws.name, sandboxKind.children, item.name);
      unmeterResource(deps, item as never);
      recordStatus(deps, ws.name, item.name, "TERMINATED", "terminated: the expired sandbox's agent is stopped and its files are retired");
      const terminated = deps.resources.get(ws.name, "sandbox", item.name);
      if (terminated) {
        (terminated.doc as ExpiringDoc).terminatedAt = iso(now);
        deps.resources.update(terminated);
      }
      deps.logger.info({ workspace: ws.name, sandbox: item.name, reason: expiry.reason, action: expiry.action }, "sandbox expired");
      expired.push({ workspace: ws.name, sandbox: item.name, reason: expiry.reason });
    }
  }
  return expired;
}

/** Checks for due expiries every `everyMs` of real time; the returned function stops it. */
export function startExpirySweeps(deps: SimDeps, everyMs: number): () => void {
  const timer = setInterval(() => {
    try {
      expireDueSandboxes(deps);
    } catch (err) {
      deps.logger.warn({ err: (err as Error).message }, "sandbox expiry sweep failed");
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** A sandbox name held by a TERMINATED (expired) record is free: the record goes before a new sandbox takes the name. */
export function dropTerminated(deps: Pick<SimDeps, "resources">, workspace: string, name: string): void {
  if (deps.resources.get(workspace, "sandbox", name)?.status === "TERMINATED") deps.resources.delete(workspace, "sandbox", name);
}

/** How often (simulator clock) a sandbox's lastUsedAt is written: each proxied request would be a store write. */
const LAST_USE_EVERY_MS = 60_000;

/**
 * Records the sandbox's last use (a request through the proxy) as
 * `lastUsedAt` (control-plane.md §3.2), at most once a minute, so ttl-idle
 * expiry survives a restart of a --data simulator (to the minute).
 */
export function recordLastUse(deps: Pick<SimDeps, "resources" | "clock">, workspace: string, sandbox: string): void {
  const item = deps.resources.get(workspace, "sandbox", sandbox);
  if (!item) return;
  const doc = item.doc as ExpiringDoc;
  const now = deps.clock.now();
  const last = dateMs(doc.lastUsedAt);
  if (last !== undefined && now - last < LAST_USE_EVERY_MS && now >= last) return;
  doc.lastUsedAt = iso(now);
  deps.resources.update(item);
}
