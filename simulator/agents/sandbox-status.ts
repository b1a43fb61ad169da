import { iso } from "../clock.js";
import type { SimClock } from "../clock.js";
import type { ResourceStore } from "../store/resources.js";
import type { SupervisorEvent } from "../launcher/index.js";

/**
 * Turns the supervisor's reports into the sandbox resource's status and
 * events, so GET /sandboxes/{name} tells the truth about its agent:
 * crashed → DEPLOYING (restarting) with the exit in the event, restarted →
 * DEPLOYED, gave up → FAILED.
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
    case "crashed": {
      const how = event.exit.signal ? `signal ${event.exit.signal}` : `exit code ${event.exit.code}`;
      const next = event.restartInMs === null ? "not restarting" : `restarting in ${event.restartInMs} ms`;
      const last = event.exit.stderr.trim().split("\n").pop();
      return { status: event.restartInMs === null ? "FAILED" : "DEPLOYING", message: `sandbox agent crashed (${how}), ${next}${last ? `: ${last.slice(0, 300)}` : ""}` };
    }
    case "restarted":
      return { status: "DEPLOYED", message: `sandbox agent restarted (attempt ${event.attempt})` };
    case "restart-failed":
      return { status: event.restartInMs === null ? "FAILED" : "DEPLOYING", message: `sandbox agent restart failed: ${event.message.slice(0, 300)}` };
    case "gave-up":
      return { status: "FAILED", message: `sandbox agent gave up after ${event.attempts} failed restarts` };
    default:
      return undefined; // started and stopped follow the create and delete the API already recorded
  }
}

export function recordAgentEvent(deps: { resources: ResourceStore; clock: SimClock }, workspace: string, sandbox: string, event: SupervisorEvent): void {
  const change = describe(event);
  if (!change) return;
  const item = deps.resources.get<SandboxDoc>(workspace, "sandbox", sandbox);
  if (!item) return;
  const doc = item.doc;
  // A planned move (an update's DEPLOYING → DEPLOYED) must not later paper over a crashed agent.
  if (event.type !== "restarted") delete doc.__pending;
  doc.status = change.status;
  doc.events = [...(doc.events ?? []), { type: "agent", status: change.status, message: change.message, revision: `rev-${doc.__revision ?? 1}`, time: iso(deps.clock.now()) }];
  item.status = change.status;
  deps.resources.update(item);
}

/** spec.runtime.envs ([{name, value}]) as the agent's environment. */
export function envOf(doc: { spec?: { runtime?: { envs?: { name?: string; value?: string }[] } } }): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of doc.spec?.runtime?.envs ?? []) if (e.name) env[e.name] = e.value ?? "";
  return env;
}
