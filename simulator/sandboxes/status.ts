import { toIso as iso, type Clock } from "../../src/clock.js";
import type { ResourceStore } from "../store/resources.js";
import type { SupervisorEvent } from "../launcher/index.js";

/**
 * Turns the supervisor's reports into the sandbox resource's status and
 * events, so GET /sandboxes/{name} tells the truth about its agent:
 * started (healthy) → DEPLOYED, crashed → DEPLOYING (restarting) with the
 * exit in the event, restarted → DEPLOYED, gave up or could not start → FAILED.
 */

interface SandboxDoc {
  status?: string;
  events?: { type: string; status: string; message: string; revision: string; time: string }[];
  __revision?: number;
  __pending?: unknown[];
  [key: string]: unknown;
}

function describe(event: SupervisorEvent): { status: string; message: string } | undefined {
  switch (event.type) {
    case "queued":
      return {
        status: "DEPLOYING",
        message:
          event.ahead === 0
            ? `waiting to start: next in line (${event.running} starting)`
            : `waiting to start: ${event.ahead} sandbox${event.ahead === 1 ? "" : "es"} ahead (${event.running} starting)`,
      };
    case "started":
      return { status: "DEPLOYED", message: `sandbox agent is healthy${event.placement ? ` (${event.placement})` : ""}` };
    case "crashed": {
      // begin() reports a first start that failed as a crash that will not be retried (attempt 0).
      if (event.attempt === 0) return { status: "FAILED", message: `sandbox agent did not start: ${event.exit.stderr.trim().slice(0, 300)}` };
      const how = event.exit.signal ? `signal ${event.exit.signal}` : `exit code ${event.exit.code}`;
      const next = event.restartInMs === null ? "not restarting" : `restarting in ${event.restartInMs} ms`;
      const last = event.exit.stderr.trim().split("\n").pop();
      return {
        status: event.restartInMs === null ? "FAILED" : "DEPLOYING",
        message: `sandbox agent crashed (${how}), ${next}${last ? `: ${last.slice(0, 300)}` : ""}`,
      };
    }
    case "restarted":
      return { status: "DEPLOYED", message: `sandbox agent restarted (attempt ${event.attempt})${event.placement ? ` (${event.placement})` : ""}` };
    case "restart-failed":
      return { status: event.restartInMs === null ? "FAILED" : "DEPLOYING", message: `sandbox agent restart failed: ${event.message.slice(0, 300)}` };
    case "gave-up":
      return { status: "FAILED", message: `sandbox agent gave up after ${event.attempts} failed restarts` };
    default:
      return undefined; // stopped: the operation that stopped the agent records where the sandbox went
  }
}

export function recordAgentEvent(deps: { resources: ResourceStore; clock: Clock }, workspace: string, sandbox: string, event: SupervisorEvent): void {
  const change = describe(event);
  if (!change) return;
  const item = deps.resources.get<SandboxDoc>(workspace, "sandbox", sandbox);
  const current = item?.status;
  // A sandbox being archived or deactivated keeps the status its operation gives it.
  if (current && STOPPING.has(current)) return;
  const firstReady =
    event.type === "started" && item !== undefined && item.doc.__readyAt === undefined && !item.doc.events?.some((e) => e.status === "DEPLOYED");
  recordStatus(deps, workspace, sandbox, change.status, change.message, "agent", event.type !== "restarted");
  if (firstReady) markReady(deps, workspace, sandbox);
}

/**
 * The moment a new sandbox first became ready (its agent healthy: what its
 * create answers on), kept as `__readyAt`. Its ttl, ttl-max-age and
 * ttl-idle count from there (sandboxes/expiry-rules.ts), so a slow cold
 * start does not eat the lifetime the user asked for. Set once: a restart
 * or reboot later does not move it.
 */
function markReady(deps: { resources: ResourceStore; clock: Clock }, workspace: string, sandbox: string): void {
  const item = deps.resources.get<SandboxDoc>(workspace, "sandbox", sandbox);
  if (!item || item.doc.__readyAt !== undefined) return;
  item.doc.__readyAt = iso(deps.clock.now());
  deps.resources.update(item);
}

/** Statuses of a sandbox whose agent is being (or has been) stopped on purpose. */
const STOPPING = new Set(["ARCHIVING", "ARCHIVED", "DEACTIVATING", "DEACTIVATED", "DELETING", "TERMINATED"]);

/**
 * Sets a sandbox's status with an event saying why; `dropPlanned` (default)
 * also drops its planned moves: a planned move (an update's DEPLOYING →
 * DEPLOYED) must not later paper over what its agent really did.
 */
export function recordStatus(
  deps: { resources: ResourceStore; clock: Clock },
  workspace: string,
  sandbox: string,
  status: string,
  message: string,
  type = "deployment",
  dropPlanned = true,
): void {
  const item = deps.resources.get<SandboxDoc>(workspace, "sandbox", sandbox);
  if (!item) return;
  const doc = item.doc;
  if (dropPlanned) delete doc.__pending;
  doc.status = status;
  doc.events = [...(doc.events ?? []), { type, status, message, revision: `rev-${doc.__revision ?? 1}`, time: iso(deps.clock.now()) }];
  item.status = status;
  deps.resources.update(item);
}

/** spec.runtime.envs ([{name, value}]) as the agent's environment. */
export function envOf(doc: { spec?: { runtime?: { envs?: { name?: string; value?: string }[] } } }): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of doc.spec?.runtime?.envs ?? []) if (e.name) env[e.name] = e.value ?? "";
  return env;
}
