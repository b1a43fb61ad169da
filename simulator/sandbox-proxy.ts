import { authenticateHeaders, selectWorkspace, type PrincipalSources } from "./auth/principal.js";
import { grants, type Scope } from "./auth/scopes.js";
import type { AccountStore } from "./store/accounts.js";
import { ApiError, errors } from "../src/errors.js";
import { createPreviewRouter } from "./previews/router.js";
import { createSandboxProxy, edgeError, type SandboxProxy, type SandboxTarget, type Upstream } from "./proxy/index.js";
import { expireDueSandboxes, type ExpiryDeps } from "./sandboxes/expiry.js";
import type { SandboxAgents } from "./agents/registry.js";
import { isSessionToken, terminalQueryToken } from "./agents/terminal-auth.js";

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
 * `show_secrets` reaches it only from an admin of the workspace. Preview URLs
 * (simulator/previews) go through the same proxy.
 */

/** Statuses of a sandbox that exists but has no agent to answer now: 503, retry (not 404, do not). */
const STOPPED = new Set(["ARCHIVING", "ARCHIVED", "UNARCHIVING", "DEACTIVATING", "DEACTIVATED", "DEPLOYING", "FAILED"]);

/** What the sandbox proxy reads: who calls (principals), and the sandboxes, whose expiry it applies first. */
type Sources = PrincipalSources & ExpiryDeps;

/**
 * The running agent of a sandbox, or the error the edge gives: the sandbox's
 * expiry is applied first (a read after its ttl finds it gone), then an
 * unknown or expired sandbox is WORKLOAD_NOT_FOUND (404) and one that exists
 * without a running agent WORKLOAD_UNAVAILABLE (503).
 */
export async function sandboxUpstream(deps: Sources, agents: SandboxAgents, target: SandboxTarget): Promise<Upstream> {
  if (!deps.accounts.workspace(target.workspace)) {
    throw edgeError("WORKSPACE_NOT_FOUND", errors.notFound(`workspace "${target.workspace}" not found`));
  }
  expireDueSandboxes(deps, { workspace: target.workspace, sandbox: target.sandbox });
  const status = deps.resources.get(target.workspace, "sandbox", target.sandbox)?.status;
  const gone = (why: string) =>
    edgeError("WORKLOAD_NOT_FOUND", errors.notFound(`sandbox "${target.sandbox}" not found in workspace "${target.workspace}"${why}`));
  if (status === "TERMINATED" || status === "DELETING") throw gone(` (${status})`);
  try {
    return await agents.upstream(target);
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 404 && err.status !== 503)) throw err;
    if (status === undefined && err.status === 404) throw gone("");
    const why =
      status && STOPPED.has(status) ? `it is ${status}` : err.status === 503 ? err.message.replace(/^.*is unavailable: /, "") : "its agent is not running";
    throw edgeError("WORKLOAD_UNAVAILABLE", errors.serviceUnavailable(`sandbox "${target.sandbox}" in workspace "${target.workspace}" is unavailable: ${why}`));
  }
}

export function createSimulatorSandboxProxy(src: Sources, agents: SandboxAgents): SandboxProxy {
  return createSandboxProxy({
    authorize: (req, target) => {
      // The platform's own header wins: with it, an Authorization header is the app's (sandbox.fetch(port, path, {headers})).
      const h = req.headers;
      let headers = h["x-blaxel-authorization"] || h["x-service-authorization"] ? { ...h, authorization: undefined } : h;
      // The terminal's ?token= (terminal-auth.ts): checked here, never passed on to the agent.
      const queryToken = terminalQueryToken(h, target.path);
      if (queryToken !== undefined) {
        target.path = withoutQueryParameter(target.path, "token");
        if (src.accounts.workspace(target.workspace) && isSessionToken(src, target, queryToken)) return;
        headers = { authorization: `Bearer ${queryToken}` };
      }
      const principal = authenticateHeaders(src, headers);
      if (!grants(principal.scopes, SANDBOX_URL_SCOPE)) throw errors.forbidden(`missing scope ${SANDBOX_URL_SCOPE}`);
      if (!src.accounts.workspace(target.workspace)) throw edgeError("WORKSPACE_NOT_FOUND", errors.notFound(`workspace "${target.workspace}" not found`));
      const { role } = selectWorkspace(principal, target.workspace);
      if (role !== "admin") target.path = withoutQueryParameter(target.path, "show_secrets");
    },
    upstream: (target) => sandboxUpstream(src, agents, target),
    // An open terminal (or any upgraded socket) counts as use of the sandbox: asking for its agent records one.
    markInUse: (target) => void agents.upstream(target).catch(() => undefined),
    inUse: (target) => agents.inUse(target),
    workspaceOfId: workspaceIdIndex(src.accounts),
    previews: createPreviewRouter(src),
    now: () => src.clock.now(),
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
  const kept = path
    .slice(q + 1)
    .split("&")
    .filter((pair) => {
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
