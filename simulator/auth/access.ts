import type { Request } from "express";
import type { Db } from "../../src/sqlite.js";
import type { SimClock } from "../clock.js";
import { authenticateHeaders, type PrincipalSources } from "./principal.js";

/**
 * What account-level modules (the metrics router, issue 6) need to know
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
  return { accountId: p.accountId, isAccountAdmin: p.accountAdmin, workspaces: [...p.workspaces.keys()] };
}

/** Everything a router factory mounted under /v0/accounts/{accountId}/... receives. */
export interface AccountRouterDeps {
  db: Db;
  clock: SimClock;
  testHooks: boolean;
  access: (req: Request) => CallerAccess;
}

export function accountRouterDeps(deps: PrincipalSources & { db: Db; testHooks: { enabled: boolean } }): AccountRouterDeps {
  return { db: deps.db, clock: deps.clock, testHooks: deps.testHooks.enabled, access: (req) => callerAccess(deps, req) };
}
