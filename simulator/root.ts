import { CursorCodec } from "../src/cursor.js";
import { uuidIds, type Ids } from "../src/ids.js";
import { silentLogger, type Logger } from "../src/logging.js";
import { migrate, openDatabase } from "../src/sqlite.js";
import { AccountStore } from "./accounts/store.js";
import { applySeed, bootstrap, generateApiKey, readSeedFile } from "./accounts/seed.js";
import { CredentialStore } from "./auth/credentials.js";
import { PrincipalCache } from "./auth/principal-cache.js";
import type { Principal } from "./auth/principal.js";
import { SIGNING_SECRET_MIGRATIONS, signingSecret, storedSecretText } from "./auth/signing-secrets.js";
import { SimClock } from "./clock.js";
import type { SimConfig } from "./config.js";
import { SimConfigSchema } from "./config.js";
import type { SimDeps } from "./deps.js";
import { UsageMeter } from "./metrics/meter.js";
import { UsageStore } from "./metrics/store.js";
import { meterSandboxAgent } from "./resources/sandbox-usage.js";
import { settleJobUsage } from "./jobs/usage.js";
import { ResourceStore } from "./store/resources.js";
import { SIMULATOR_MIGRATIONS } from "./store/migrations.js";
import { initialHooksState } from "./test-hooks/state.js";

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
  const principals = new PrincipalCache<Principal>();
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
