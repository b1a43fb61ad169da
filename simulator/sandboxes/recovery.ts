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
 * An image build from an uploaded context (image-uploads.ts) the previous run did not finish: its builder and
 * its upload URL went with that run, so the sandbox is FAILED, saying so (upload again: the SDK's build(),
 * `bl deploy`), never left UPLOADING or BUILDING.
 */
const INTERRUPTED: Record<string, string> = {
  UPLOADING: "upload interrupted: the simulator restarted before the build context was uploaded (its upload URL is no longer valid); upload it again",
  BUILDING: "build interrupted: the simulator restarted while the image was being built from the uploaded context; upload it again",
};

/**
 * With --data, the sandboxes of the previous run get their agents back: an agent that run left behind is
 * stopped first (launcher pid file), then a fresh one serves the same files. A stop it did not finish is
 * completed instead.
 */
export function recoverSandboxes(deps: { accounts: AccountStore; resources: ResourceStore; clock: SimClock }, agents: SandboxAgents): void {
  for (const ws of deps.accounts.allWorkspaces()) {
    for (const item of deps.resources.allOfKind(ws.name, ["sandbox"])) {
      if (item.parent !== "" || GONE.has(item.status)) continue;
      const interrupted = INTERRUPTED[item.status];
      if (interrupted) {
        recordStatus(deps, ws.name, item.name, "FAILED", interrupted);
        continue;
      }
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
