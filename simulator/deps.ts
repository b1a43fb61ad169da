import { CursorCodec } from "../src/cursor.js";
import { uuidIds, type Ids } from "../src/ids.js";
import { silentLogger, type Logger } from "../src/logging.js";
import { migrate, openDatabase, type Db } from "../src/sqlite.js";
import { AccountStore } from "./accounts/store.js";
import { applySeed, bootstrap, generateApiKey, readSeedFile } from "./accounts/seed.js";
import { CredentialStore } from "./auth/credentials.js";
import { PrincipalCache } from "./auth/principal-cache.js";
import { SIGNING_SECRET_MIGRATIONS, signingSecret, storedSecretText } from "./auth/signing-secrets.js";
import { SimClock } from "./clock.js";
import type { SandboxAgents } from "./agents/registry.js";
import type { JobRunner } from "./jobs/runner.js";
import type { SandboxImages } from "./images/sandbox-images.js";
import type { SimConfig } from "./config.js";
import { SimConfigSchema } from "./config.js";
import { UsageMeter } from "./metrics/meter.js";
import { UsageStore } from "./metrics/store.js";
import type { SupervisorEvent } from "./launcher/index.js";
import { meterSandboxAgent } from "./resources/sandbox-usage.js";
import { settleJobUsage } from "./jobs/usage.js";
import { ResourceStore } from "./store/resources.js";
import { SIMULATOR_MIGRATIONS } from "./store/migrations.js";
import { initialHooksState, type TestHooksState } from "./test-hooks/state.js";

/** Everything a handler may use; built once by openSimulator, passed to createSimulatorApp. */
export interface SimDeps {
  config: SimConfig;
  db: Db;
  accounts: AccountStore;
  credentials: CredentialStore;
  resources: ResourceStore;
  clock: SimClock;
  ids: Ids;
  logger: Logger;
  cursors: CursorCodec;
  jwtSecret: Buffer;
  principals: PrincipalCache;
  testHooks: TestHooksState;
  /** Base URL of this simulator (set by main after listening); used for metadata.url. */
  urls: { base: string };
  /** The admin API key of the default workspace. */
  adminApiKey: string;
  /** Real sandbox-agents behind sandboxes (set by serveSimulator); absent, sandboxes are records only. */
  agents?: SandboxAgents;
  /** Runs job executions' tasks through the launcher (set by serveSimulator); absent, executions follow their simulated plan. */
  jobs?: JobRunner;
  /** Sandbox images (simulator/images, set by serveSimulator with --image-source store): a create's image is checked, then resolved to a root filesystem. */
  images?: SandboxImages;
  /** How sandboxes' agents run (set by serveSimulator), for /health: the launcher and what it isolates. */
  sandboxIsolation?: { launcher: string; isolated: boolean; detail: string; userIds?: { all: boolean; detail: string }; standby?: { afterMs: number } | { unavailable: string } };
  /** Account-metrics usage events (simulator/metrics), in the same database. */
  usage: UsageStore;
  /** Open usage spans of live resources (running, stored, verified), recorded as they live. */
  meter: UsageMeter;
  /** To call with every supervisor event of a sandbox's agent: meters the sandbox's real run time. */
  onSandboxAgentEvent: (workspace: string, sandbox: string, event: SupervisorEvent) => void;
}

export interface SimOverrides {
  clock?: SimClock;
  ids?: Ids;
  logger?: Logger;
}

export interface SimRuntime {
  deps: SimDeps;
  close(): void;
}

export function openSimulator(configInput: Partial<SimConfig> = {}, overrides: SimOverrides = {}): SimRuntime {
  const config: SimConfig = Object.freeze(SimConfigSchema.parse({ ...configInput }));
  const seed = config.seed ? readSeedFile(config.seed) : undefined;
  const db = openDatabase(config.data);
  migrate(db, SIMULATOR_MIGRATIONS);
  migrate(db, SIGNING_SECRET_MIGRATIONS);
  const clock = overrides.clock ?? new SimClock();
  const principals = new PrincipalCache();
  const resources = new ResourceStore(db);
  const usage = new UsageStore(db);
  // Account changes can drop principals' rights, and a workspace deletion removes rows behind the resource store.
  const changed = () => {
    principals.invalidate();
    resources.clearCache();
  };
  const deps: SimDeps = {
    config,
    db,
    accounts: new AccountStore(db, changed),
    credentials: new CredentialStore(db, changed),
    resources,
    clock,
    ids: overrides.ids ?? uuidIds,
    logger: overrides.logger ?? silentLogger(),
    cursors: new CursorCodec({ now: () => clock.now(), secret: signingSecret(db, "cursor") }),
    jwtSecret: signingSecret(db, "jwt"),
    principals,
    testHooks: initialHooksState(config.testHooks),
    urls: { base: config.publicUrl ?? `http://${config.host}:${config.port}` },
    // One admin key per data file: a restart with --data prints the key it printed before (unless --api-key).
    adminApiKey: config.apiKey ?? storedSecretText(db, "admin-api-key", generateApiKey),
    usage,
    meter: new UsageMeter(usage, clock),
    onSandboxAgentEvent: (workspace, sandbox, event) => meterSandboxAgent(deps, workspace, sandbox, event),
  };
  // Job executions end on the clock: the ones nobody read are recorded before each metrics query.
  deps.meter.beforeFlush((now) => settleJobUsage(deps, now));
  bootstrap(deps, config.workspace, deps.adminApiKey);
  if (seed) applySeed(deps, seed);
  return { deps, close: () => db.close() };
}

/** Wipes every table and re-creates the start state (POST /_sim/reset). */
export function resetState(deps: SimDeps): void {
  deps.db.transaction(() => {
    for (const table of ["resources", "oauth_grants", "oauth_clients", "api_keys", "service_accounts", "memberships", "users", "workspaces", "accounts"]) deps.db.exec(`DELETE FROM ${table}`);
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
