import type { SandboxAgents } from "../agents/registry.js";
import type { AccountStore } from "../store/accounts.js";
import type { ResourceStore } from "../store/resources.js";
import type { SimClock } from "../clock.js";
import { launchOptions } from "./agent-lifecycle.js";
import { recordStatus } from "./status.js";

/** Sandboxes in these states have no agent to bring back. */
const GONE = new Set(["TERMINATED", "DELETING", "FAILED", "ARCHIVED", "DEACTIVATED"]);
/** A stop the previous run did not finish: its agent is gone now, so the move is complete. */
const STOPPED_AS: Record<string, string> = { ARCHIVING: "ARCHIVED", DEACTIVATING: "DEACTIVATED" };

/**
 * With --data, the sandboxes of the previous run get their agents back: an agent that run left behind is
 * stopped first (launcher pid file), then a fresh one serves the same files. A stop it did not finish is
 * completed instead.
 */
export function recoverSandboxes(deps: { accounts: AccountStore; resources: ResourceStore; clock: SimClock }, agents: SandboxAgents): void {
  for (const ws of deps.accounts.allWorkspaces()) {
    for (const item of deps.resources.allOfKind(ws.name, ["sandbox"])) {
      if (item.parent !== "" || GONE.has(item.status)) continue;
      const stopped = STOPPED_AS[item.status];
      if (stopped) {
        recordStatus(deps, ws.name, item.name, stopped, `${stopped.toLowerCase()}: the simulator restarted while its agent was stopping`);
        continue;
      }
      recordStatus(deps, ws.name, item.name, "DEPLOYING", "the simulator restarted: starting the sandbox agent again");
      agents.begin(ws.name, item.name, launchOptions(item.doc));
    }
  }
}
