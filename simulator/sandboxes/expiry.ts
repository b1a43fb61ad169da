import { toIso as iso } from "../../src/clock.js";
import type { StoredResource } from "../store/resources.js";
import type { Logger } from "../../src/logging.js";
import type { SimClock } from "../clock.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { AccountStore } from "../store/accounts.js";
import type { ResourceStore } from "../store/resources.js";
import type { SandboxExpiryRuntime } from "./runtime.js";
import { recordStatus } from "./status.js";
import { unmeterResource } from "../resources/resource-usage.js";
import { dateMs, sandboxExpiry, terminatedRetentionMs, type ExpiringDoc } from "./expiry-rules.js";

/** What applying expiries uses: the sandboxes' records, their runtime, the clock, the meter and the log. */
/** The kinds stored under a sandbox: deleted with it, by a delete (the sandbox kind's children) and by expiry. */
export const SANDBOX_CHILDREN = ["preview", "preview-token", "schedule", "schedule-execution"];

export interface ExpiryDeps {
  clock: SimClock;
  accounts: AccountStore;
  resources: ResourceStore;
  sandboxes: SandboxExpiryRuntime;
  logger: Logger;
  meter: UsageMeter;
}

/**
 * Applies every expiry that is due (expiry-rules.ts, read on the simulator
 * clock, so the test hooks' clock moves expire sandboxes too): the sandbox records a DELETING event
 * saying which limit was reached, its agent is stopped and its files retired
 * through the same code as DELETE /sandboxes/{name} (SandboxAgents.retire),
 * its children go, and the record stays TERMINATED (hidden from lists unless
 * ?showTerminated=true) with those events for its terminatedRetention, then
 * goes too. A new sandbox may take the name at once (dropTerminated).
 * Returns what expired.
 */
export function expireDueSandboxes(
  deps: ExpiryDeps,
  scope: { workspace?: string; sandbox?: string } = {},
): { workspace: string; sandbox: string; reason: string }[] {
  const now = deps.clock.now();
  const expired: { workspace: string; sandbox: string; reason: string }[] = [];
  const workspaces = scope.workspace ? [scope.workspace] : deps.accounts.allWorkspaces().map((w) => w.name);
  for (const ws of workspaces) {
    const items = scope.sandbox ? [deps.resources.get(ws, "sandbox", scope.sandbox)].filter((i) => i !== undefined) : deps.resources.allOfKind(ws, ["sandbox"]);
    for (const item of items) {
      const reason = expireIfDue(deps, ws, item, now);
      if (reason) expired.push({ workspace: ws, sandbox: item.name, reason });
    }
  }
  return expired;
}

/**
 * One sandbox: a TERMINATED record past its retention goes; a live one whose
 * expiry is due is deleted (returns why). A sandbox whose agent is starting
 * is left for the next look: its create (or restart) is answering, and
 * retiring the agent under it would turn a successful create into a 503.
 */
function expireIfDue(deps: ExpiryDeps, ws: string, item: StoredResource, now: number): string | undefined {
  if (item.parent !== "" || item.status === "DELETING") return undefined;
  if (item.status === "TERMINATED") {
    const doc = item.doc as ExpiringDoc;
    const since = doc.terminatedAt ? Date.parse(doc.terminatedAt) : now;
    if (since + terminatedRetentionMs(doc) <= now) deps.resources.delete(ws, "sandbox", item.name);
    return undefined;
  }
  const expiry = sandboxExpiry(deps, ws, item.name, item.doc as ExpiringDoc);
  if (!expiry || expiry.dueMs > now) return undefined;
  if (deps.sandboxes.isStarting(ws, item.name)) return undefined;
  recordStatus(deps, ws, item.name, "DELETING", `expired: ${expiry.reason}; deleting the sandbox`);
  deps.sandboxes.retire(ws, item.name, (err) =>
    deps.logger.warn({ workspace: ws, sandbox: item.name, err: err.message }, "expired sandbox agent cleanup failed"),
  );
  deps.resources.deleteChildren(ws, SANDBOX_CHILDREN, item.name);
  unmeterResource(deps, item);
  recordStatus(deps, ws, item.name, "TERMINATED", "terminated: the expired sandbox's agent is stopped and its files are retired");
  const terminated = deps.resources.get(ws, "sandbox", item.name);
  if (terminated) {
    (terminated.doc as ExpiringDoc).terminatedAt = iso(now);
    deps.resources.update(terminated);
  }
  deps.logger.info({ workspace: ws, sandbox: item.name, reason: expiry.reason, action: expiry.action }, "sandbox expired");
  return expiry.reason;
}

/** Checks for due expiries every `everyMs` of real time; the returned function stops it. */
export function startExpirySweeps(deps: ExpiryDeps, everyMs: number): () => void {
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
export function dropTerminated(deps: Pick<ExpiryDeps, "resources">, workspace: string, name: string): void {
  if (deps.resources.get(workspace, "sandbox", name)?.status === "TERMINATED") deps.resources.delete(workspace, "sandbox", name);
}

/** How often (simulator clock) a sandbox's lastUsedAt is written: each proxied request would be a store write. */
const LAST_USE_EVERY_MS = 60_000;

/**
 * Records the sandbox's last use (a request through the proxy) as
 * `lastUsedAt` (control-plane.md §3.2), at most once a minute, so ttl-idle
 * expiry survives a restart of a --data simulator (to the minute).
 */
export function recordLastUse(deps: Pick<ExpiryDeps, "resources" | "clock">, workspace: string, sandbox: string): void {
  const item = deps.resources.get(workspace, "sandbox", sandbox);
  if (!item) return;
  const doc = item.doc as ExpiringDoc;
  const now = deps.clock.now();
  const last = dateMs(doc.lastUsedAt);
  if (last !== undefined && now - last < LAST_USE_EVERY_MS && now >= last) return;
  doc.lastUsedAt = iso(now);
  deps.resources.update(item);
}
