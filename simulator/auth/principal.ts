import type { IncomingHttpHeaders } from "node:http";
import { bearerToken } from "../../src/auth.js";
import { errors } from "../../src/errors.js";
import type { AccountStore, Role } from "../store/accounts.js";
import type { Clock } from "../../src/clock.js";
import { verifyJwt } from "./jwt.js";
import type { CredentialStore, SubjectType } from "./credentials.js";
import type { PrincipalCache } from "./principal-cache.js";

/** Who is calling, resolved from a bearer credential on every request (nothing is cached across requests). */
export interface Principal {
  type: SubjectType;
  /** User sub or service-account client_id. */
  sub: string;
  email?: string;
  accountId: string;
  /** Account admins see and administer every workspace of their account. */
  accountAdmin: boolean;
  scopes: ReadonlySet<string>;
  /** Workspace name → the caller's role in it. */
  workspaces: ReadonlyMap<string, Role>;
}

export interface PrincipalSources {
  accounts: AccountStore;
  credentials: CredentialStore;
  clock: Clock;
  jwtSecret: Buffer;
  principals?: PrincipalCache<Principal>;
}

const ALL = new Set(["admin"]);

/** Builds the principal of a subject, or undefined when it no longer exists (deleted → its credentials die at once). */
export function principalOf(src: PrincipalSources, type: SubjectType, sub: string, scopes: ReadonlySet<string> = ALL): Principal | undefined {
  if (type === "service_account") {
    const sa = src.credentials.serviceAccount(sub);
    const ws = sa && src.accounts.workspace(sa.workspace);
    if (!sa || !ws) return undefined;
    // A service account has full rights in its own workspace and is not an account admin.
    return { type, sub, accountId: ws.accountId, accountAdmin: false, scopes, workspaces: new Map([[ws.name, "admin" as Role]]) };
  }
  const user = src.accounts.user(sub);
  if (!user) return undefined;
  const workspaces = new Map<string, Role>();
  if (user.role === "admin") for (const name of src.accounts.workspaceNamesOfAccount(user.account_id)) workspaces.set(name, "admin");
  for (const m of src.accounts.membershipsOf(sub)) if (!workspaces.has(m.workspace)) workspaces.set(m.workspace, m.role);
  return { type, sub, email: user.email, accountId: user.account_id, accountAdmin: user.role === "admin", scopes, workspaces };
}

/**
 * Resolves the bearer credential of a request: a signed access token (JWT)
 * or an API key. Unknown, expired or revoked → 401.
 */
export function authenticateHeaders(src: PrincipalSources, headers: IncomingHttpHeaders): Principal {
  const token = bearerToken(headers);
  if (!token) throw errors.unauthorized("missing bearer credential (Authorization or X-Blaxel-Authorization)");
  const now = src.clock.now();
  const cached = src.principals?.get(token, now);
  if (cached) return cached;
  if (token.split(".").length === 3) {
    const claims = verifyJwt(token, src.jwtSecret);
    if (!claims) throw errors.unauthorized("invalid access token");
    if (claims.exp * 1000 <= now) throw errors.unauthorized("access token expired");
    let principal = principalOf(src, claims.sub_type, claims.sub, new Set(claims.scope.split(" ").filter(Boolean)));
    if (!principal) throw errors.unauthorized("access token revoked");
    // A token minted for one workspace (a drive's access token) is valid there only.
    if (claims.workspace !== undefined) {
      const role = principal.workspaces.get(claims.workspace);
      principal = { ...principal, accountAdmin: false, workspaces: new Map(role ? [[claims.workspace, role]] : []) };
    }
    src.principals?.set(token, principal, claims.exp * 1000);
    return principal;
  }
  const key = src.credentials.apiKeyBySecret(token);
  if (!key) throw errors.unauthorized("invalid API key");
  if (key.expires_ms !== null && key.expires_ms <= now) throw errors.unauthorized("API key expired");
  const principal = principalOf(src, key.sub_type, key.sub);
  if (!principal) throw errors.unauthorized("API key revoked");
  src.principals?.set(token, principal, key.expires_ms ?? Number.POSITIVE_INFINITY);
  return principal;
}

export const WORKSPACE_HEADERS = ["x-blaxel-workspace", "x-service-workspace"] as const;

/** Workspace named by `X-Blaxel-Workspace`, `X-Service-Workspace` or `?workspace=`. */
export function requestedWorkspace(headers: IncomingHttpHeaders, query: Record<string, unknown>): string | undefined {
  for (const name of WORKSPACE_HEADERS) {
    const v = headers[name];
    const value = Array.isArray(v) ? v[0] : v;
    if (value) return value.trim();
  }
  const q = query.workspace;
  return typeof q === "string" && q !== "" ? q : undefined;
}

/** The workspace a request acts in; 403 when the credential does not belong to it. */
export function selectWorkspace(principal: Principal, requested: string | undefined): { workspace: string; role: Role } {
  if (!requested) {
    if (principal.workspaces.size === 1) {
      const [workspace, role] = [...principal.workspaces][0]!;
      return { workspace, role };
    }
    throw errors.badRequest("X-Blaxel-Workspace: header (or ?workspace=) required: the credential belongs to several workspaces");
  }
  const role = principal.workspaces.get(requested);
  if (!role) throw errors.forbidden(`the credential does not belong to workspace "${requested}"`);
  return { workspace: requested, role };
}
