import type { Request } from "express";
import { errors } from "../../src/errors.js";
import { authenticateHeaders, type PrincipalSources } from "./principal.js";
import { grants, type Scope } from "./scopes.js";

export const METRICS_SCOPE: Scope = "workspaces:get";

/**
 * What account-level modules (the metrics router) need to know
 * about a caller: its account, whether it administers that account, and the
 * workspaces it may see. Throws the catalogue's 401 for a bad credential.
 */
export interface CallerAccess {
  accountId?: string;
  isAccountAdmin: boolean;
  workspaces: string[];
}

export function callerAccess(src: PrincipalSources, req: Request): CallerAccess {
  const p = authenticateHeaders(src, req.headers);
  // Account metrics are a workspace read: a narrower token (a drive's, `sandboxes:get`) does not see them.
  if (!grants(p.scopes, METRICS_SCOPE)) throw errors.forbidden(`missing scope ${METRICS_SCOPE}`);
  // Only workspaces of the caller's own account: a membership elsewhere does not show in this account's metrics.
  const workspaces = [...p.workspaces.keys()].filter((name) => src.accounts.workspace(name)?.accountId === p.accountId);
  return { accountId: p.accountId, isAccountAdmin: p.accountAdmin, workspaces };
}
