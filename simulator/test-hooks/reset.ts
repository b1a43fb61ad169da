import { bootstrap } from "../accounts/seed.js";
import type { SimDeps } from "../deps.js";

/** What a reset empties and re-creates: the tables, caches, clock, test-hook state and usage. */
export type ResetDeps = Pick<
  SimDeps,
  "db" | "accounts" | "credentials" | "ids" | "config" | "adminApiKey" | "principals" | "resources" | "clock" | "testHooks" | "usage" | "meter"
>;

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
