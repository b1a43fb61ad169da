/**
 * The composition root: the state (database, stores, clock, metering) is opened here, bootstrapped and seeded,
 * and the dependencies handlers see are assembled here once, complete, with what follows a resource's life
 * (usage metering) wired as a listener. serve.ts adds the real workloads (launcher, agents, jobs, images);
 * openSimulator is the records-only simulator the unit tests use.
 */
import { CursorCodec } from "../src/cursor.js";
import { uuidIds, type Ids } from "../src/ids.js";
import { silentLogger, type Logger } from "../src/logging.js";
import { migrate, openDatabase } from "../src/sqlite.js";
import { AccountStore } from "./store/accounts.js";
import { applySeed, bootstrap, generateApiKey, readSeedFile } from "./accounts/seed.js";
import { CredentialStore } from "./auth/credentials.js";
import { PrincipalCache } from "./auth/principal-cache.js";
import type { Principal } from "./auth/principal.js";
import { SIGNING_SECRET_MIGRATIONS, signingSecret, storedSecretText } from "./auth/signing-secrets.js";
import { SimClock } from "./clock.js";
import type { SimConfig } from "./config.js";
import { SimConfigSchema } from "./config.js";
import type { RealWorkloads, SimCore, SimDeps } from "./deps.js";
import { UsageMeter } from "./metrics/meter.js";
import { UsageStore } from "./metrics/usage-store.js";
import { meterSandboxAgent } from "./sandboxes/sandbox-usage.js";
import { meterResource, unmeterResource } from "./resources/resource-usage.js";
import { settleJobUsage } from "./jobs/job-usage.js";
import { SIMULATED_JOBS } from "./jobs/executor.js";
import { SIMULATED_APPLICATIONS } from "./applications/workloads.js";
import { HOST_ROOT } from "./images/sandbox-images.js";
import { RECORDS_ONLY } from "./sandboxes/isolation.js";
import { agentSandboxes } from "./sandboxes/agent-runtime.js";
import { recordSandboxes } from "./sandboxes/records-runtime.js";
import { AgentScheduleBackend } from "./schedules/agent-backend.js";
import { LocalScheduleBackend } from "./schedules/backend.js";
import type { SupervisorEvent } from "./launcher/index.js";
import { ResourceStore } from "./store/resources.js";
import { SIMULATOR_MIGRATIONS } from "./store/migrations.js";
import { initialHooksState } from "./http/test-hooks-state.js";

export interface SimOverrides {
  clock?: SimClock;
  ids?: Ids;
  logger?: Logger;
}

export interface SimRuntime {
  deps: SimDeps;
  close(): void;
}

export interface SimState {
  core: SimCore;
  close(): void;
}

/** Opens the database and stores, bootstraps the default workspace and applies --seed. */
export function openState(configInput: Partial<SimConfig> = {}, overrides: SimOverrides = {}): SimState {
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
  const core: SimCore = {
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
  };
  // Job executions end on the clock: the ones nobody read are recorded before each metrics query.
  core.meter.beforeFlush((now) => settleJobUsage(core, now));
  bootstrap(core, config.workspace, core.adminApiKey);
  if (seed) applySeed(core, seed);
  return { core, close: () => db.close() };
}

/**
 * The dependencies handlers see, built once from the state and the real workloads (none: records only).
 * Usage follows every resource written or deleted through the store (account metrics): the generic
 * create/update/delete layer does not know about metering.
 */
export function assembleDeps(core: SimCore, workloads?: RealWorkloads): SimDeps {
  // Records only or real agents is chosen here, once: every part below is handed the implementation it runs with.
  const agents = workloads?.agents;
  const shared = {
    ...core,
    images: workloads?.images ?? HOST_ROOT,
    sandboxIsolation: workloads?.sandboxIsolation ?? RECORDS_ONLY,
    jobs: workloads?.jobs ?? SIMULATED_JOBS,
    applications: workloads?.applications ?? SIMULATED_APPLICATIONS,
    schedules: agents ? new AgentScheduleBackend(agents, core) : new LocalScheduleBackend(core),
    // Only real agents send events (records only, nothing runs to send them).
    onSandboxAgentEvent: agents
      ? (workspace: string, sandbox: string, event: SupervisorEvent) => meterSandboxAgent({ ...core, agents }, workspace, sandbox, event)
      : () => {},
  };
  const deps: SimDeps = { ...shared, sandboxes: agents ? agentSandboxes(agents, shared.images, shared) : recordSandboxes(shared) };
  const metering = { meter: core.meter, clock: core.clock, sandboxCompute: agents ? ("agent" as const) : ("record" as const) };
  core.resources.onChange(({ type, item }) => {
    if (type === "saved") meterResource(metering, item);
    else unmeterResource(metering, item);
  });
  return deps;
}

/** A records-only simulator (no launcher: sandboxes and jobs follow their simulated plans). */
export function openSimulator(configInput: Partial<SimConfig> = {}, overrides: SimOverrides = {}): SimRuntime {
  const state = openState(configInput, overrides);
  return { deps: assembleDeps(state.core), close: state.close };
}
