import type { CursorCodec } from "../src/cursor.js";
import type { Ids } from "../src/ids.js";
import type { Logger } from "../src/logging.js";
import type { Db } from "../src/sqlite.js";
import type { AccountStore } from "./store/accounts.js";
import type { CredentialStore } from "./auth/credentials.js";
import type { PrincipalCache } from "./auth/principal-cache.js";
import type { Principal } from "./auth/principal.js";
import type { OpContext } from "./http/operation.js";
import type { ScheduleBackend } from "./schedules/backend.js";
import type { SimClock } from "./clock.js";
import type { SandboxAgents } from "./agents/registry.js";
import type { JobExecutor } from "./jobs/executor.js";
import type { ApplicationWorkloads } from "./applications/workloads.js";
import type { SandboxRuntime } from "./sandboxes/runtime.js";
import type { SandboxImageSource } from "./images/sandbox-images.js";
import type { SimConfig } from "./config.js";
import type { UsageMeter } from "./metrics/meter.js";
import type { UsageStore } from "./metrics/usage-store.js";
import type { SupervisorEvent } from "./launcher/index.js";
import type { ResourceStore } from "./store/resources.js";
import type { TestHooksState } from "./http/test-hooks-state.js";
import type { SandboxIsolation } from "./sandboxes/isolation.js";

/** The state every simulator shares, records-only or with real sandboxes: configuration, database, stores, clock, ids, metering. */
export interface SimCore {
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
  principals: PrincipalCache<Principal>;
  testHooks: TestHooksState;
  /** Base URL of this simulator (set by serveSimulator once listening, the only field written later); used for metadata.url. */
  urls: { base: string };
  /** The admin API key of the default workspace. */
  adminApiKey: string;
  /** Account-metrics usage events (simulator/metrics), in the same database. */
  usage: UsageStore;
  /** Open usage spans of live resources (running, stored, verified), recorded as they live. */
  meter: UsageMeter;
}

/** What runs sandboxes and jobs for real (serveSimulator builds it); a records-only simulator has none of it. */
export interface RealWorkloads {
  /** Real sandbox-agents behind sandboxes. */
  agents: SandboxAgents;
  /** Runs job executions' tasks through the launcher. */
  jobs: JobExecutor;
  /** Runs applications' images through the launcher (absent: applications follow their simulated plan). */
  applications?: ApplicationWorkloads;
  /** Sandbox images: the image store (--image-source store), or the host's root (HOST_ROOT). */
  images: SandboxImageSource;
  sandboxIsolation: SandboxIsolation;
}

/**
 * Everything the simulator's parts are built from: the type only. The composition root (root.ts, serve.ts)
 * builds it once, complete. Only the root sees it (root.ts, serve.ts, app.ts, operations.ts): each feature
 * declares the dependencies it takes in its own module (ResourceDeps, SandboxResourceDeps, JobRouteDeps, ...),
 * and the operations table and the app hand each its own, once.
 */
export interface SimDeps extends SimCore {
  /** Checks and prepares sandboxes' images (HOST_ROOT when there is no image store, or nothing runs). */
  readonly images: SandboxImageSource;
  /** How sandboxes' agents run (RECORDS_ONLY when none does). */
  readonly sandboxIsolation: SandboxIsolation;
  /** What runs behind sandbox records: nothing (records only) or real agents. */
  readonly sandboxes: SandboxRuntime<OpContext>;
  /** Runs job executions' tasks for real, or (records only) leaves them to their simulated plan. */
  readonly jobs: JobExecutor;
  /** Runs applications for real, or (records only) leaves them to their simulated plan. */
  readonly applications: ApplicationWorkloads;
  /** Where sandbox schedules live: each sandbox's agent (real sandboxes), or records (records only). */
  readonly schedules: ScheduleBackend;
  /** To call with every supervisor event of a sandbox's agent: meters the sandbox's real run time. */
  onSandboxAgentEvent: (workspace: string, sandbox: string, event: SupervisorEvent) => void;
}
