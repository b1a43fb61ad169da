import { bootstrap } from "../accounts/seed.js";
import type { ResourceStore } from "../store/resources.js";
import type { UsageStore } from "../metrics/usage-store.js";
import type { SimConfig } from "../config.js";
import type { CredentialStore } from "../auth/credentials.js";
import type { PrincipalCache } from "../auth/principal-cache.js";
import type { Principal } from "../auth/principal.js";
import type { SimClock } from "../clock.js";
import type { Ids } from "../../src/ids.js";
import type { Db } from "../../src/sqlite.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { TestHooksState } from "../http/test-hooks-state.js";
import type { AccountStore } from "../store/accounts.js";

/** What a reset empties and re-creates: the tables, caches, clock, test-hook state and usage. */
export interface ResetDeps {
  db: Db;
  accounts: AccountStore;
  credentials: CredentialStore;
  ids: Ids;
  config: SimConfig;
  adminApiKey: string;
  principals: PrincipalCache<Principal>;
  resources: ResourceStore;
  clock: SimClock;
  testHooks: TestHooksState;
  usage: UsageStore;
  meter: UsageMeter;
}

/** Wipes every table and re-creates the start state (POST /_sim/reset). */
export function resetState(deps: ResetDeps): void {
  deps.db.transaction(() => {
    for (const table of ["resources", "oauth_grants", "oauth_clients", "api_keys", "service_accounts", "memberships", "users", "workspaces", "accounts"])
      deps.db.exec(`DELETE FROM ${table}`);
    bootstrap(deps, deps.config.workspace, deps.adminApiKey);
  })();
  deps.principals.invalidate();
  deps.resources.clearCache();
  deps.clock.reset();
  deps.testHooks.transitions = "timed";
  deps.testHooks.faults.length = 0;
  deps.testHooks.dns.clear();
  deps.usage.clear();
  deps.meter.clear();
}
