import { authenticateHeaders, selectWorkspace, type PrincipalSources } from "../auth/principal.js";
import type { AccountStore } from "../accounts/store.js";
import { createSandboxProxy, type SandboxProxy } from "../proxy/index.js";
import type { Logger } from "../../src/logging.js";
import type { SandboxAgents } from "./registry.js";

/**
 * The sandbox proxy as the simulator mounts it: the caller's credential must
 * be valid (401) and belong to the sandbox's workspace (403), exactly as on
 * the control plane; the agent then gets the sandbox's own token.
 */
export function createSimulatorSandboxProxy(src: PrincipalSources & { accounts: AccountStore; logger?: Logger }, agents: SandboxAgents): SandboxProxy {
  return createSandboxProxy({
    authorize: (req, target) => {
      selectWorkspace(authenticateHeaders(src, req.headers), target.workspace);
    },
    upstream: (target) => agents.upstream(target),
    workspaceOfId: (id) => src.accounts.allWorkspaces().find((w) => (w.doc as { id?: unknown }).id === id)?.name,
    logger: src.logger,
  });
}
