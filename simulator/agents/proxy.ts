import { errors } from "../../src/errors.js";
import { authenticateHeaders, selectWorkspace, type PrincipalSources } from "../auth/principal.js";
import { grants, type Scope } from "../auth/scopes.js";
import type { AccountStore } from "../accounts/store.js";
import { createSandboxProxy, type SandboxProxy } from "../proxy/index.js";
import type { Logger } from "../../src/logging.js";
import type { SandboxAgents } from "./registry.js";

/**
 * What a credential needs to use a sandbox's URL: the agent's API runs
 * commands and writes files, so a read-only token (`sandboxes:get`) or a
 * drive's access token does not get through.
 */
export const SANDBOX_URL_SCOPE: Scope = "sandboxes:update";

/**
 * The sandbox proxy as the simulator mounts it: the caller's credential must
 * be valid (401), allow the sandbox URL's scope and belong to the sandbox's
 * workspace (403), exactly as on the control plane; the agent then gets the
 * sandbox's own token. The agent unmasks secrets for its own token, so
 * `show_secrets` reaches it only from an admin of the workspace.
 */
export function createSimulatorSandboxProxy(src: PrincipalSources & { accounts: AccountStore; logger?: Logger }, agents: SandboxAgents): SandboxProxy {
  return createSandboxProxy({
    authorize: (req, target) => {
      const principal = authenticateHeaders(src, req.headers);
      if (!grants(principal.scopes, SANDBOX_URL_SCOPE)) throw errors.forbidden(`missing scope ${SANDBOX_URL_SCOPE}`);
      const { role } = selectWorkspace(principal, target.workspace);
      if (role !== "admin") target.path = withoutQueryParameter(target.path, "show_secrets");
    },
    upstream: (target) => agents.upstream(target),
    workspaceOfId: workspaceIdIndex(src.accounts),
    logger: src.logger,
  });
}

/**
 * Workspace name by id, read from the store once per turn of the event loop:
 * host routing tries several splits of one host name, all in one turn.
 */
function workspaceIdIndex(accounts: AccountStore): (id: string) => string | undefined {
  let index: Map<string, string> | undefined;
  return (id) => {
    if (!index) {
      index = new Map();
      for (const w of accounts.allWorkspaces()) {
        const wid = (w.doc as { id?: unknown }).id;
        if (typeof wid === "string") index.set(wid, w.name);
      }
      queueMicrotask(() => (index = undefined));
    }
    return index.get(id);
  };
}

/**
 * The path without any query parameter whose decoded name is `name` or
 * starts with `name[` (the bracket forms a qs parser reads as the same
 * key). Other parameters keep their exact bytes.
 */
export function withoutQueryParameter(path: string, name: string): string {
  const q = path.indexOf("?");
  if (q < 0) return path;
  const kept = path.slice(q + 1).split("&").filter((pair) => {
    const rawName = pair.split("=", 1)[0]!.replace(/\+/g, " ");
    let decoded: string;
    try {
      decoded = decodeURIComponent(rawName);
    } catch {
      decoded = rawName;
    }
    return decoded !== name && !decoded.startsWith(`${name}[`);
  });
  return kept.length ? `${path.slice(0, q)}?${kept.join("&")}` : path.slice(0, q);
}
