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
import type { SandboxRuntime } from "./sandboxes/runtime.js";
import type { SandboxImages } from "./images/sandbox-images.js";
import type { SimConfig } from "./config.js";
import type { UsageMeter } from "./metrics/meter.js";
import type { UsageStore } from "./metrics/store.js";
import type { SupervisorEvent } from "./launcher/index.js";
import type { ResourceStore } from "./store/resources.js";
import type { TestHooksState } from "./http/test-hooks-state.js";

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

/** How sandboxes' agents run, for /health and the start-up line: the launcher and what it isolates. */
export interface SandboxIsolation {
  launcher: string;
  isolated: boolean;
  detail: string;
  userIds?: { all: boolean; detail: string };
  /** Standby: the idle period, or why sandboxes never sleep with this launcher. */
  standby?: { afterMs: number } | { unavailable: string };
}

/** What runs sandboxes and jobs for real (serveSimulator builds it); none of it in a records-only simulator. */
export interface RealWorkloads {
  /** Real sandbox-agents behind sandboxes; absent, sandboxes are records only. */
  agents?: SandboxAgents;
  /** Runs job executions' tasks through the launcher; absent, executions follow their simulated plan. */
  jobs?: JobExecutor;
  /** Sandbox images (simulator/images, with --image-source store): a create's image is checked, then resolved to a root filesystem. */
  images?: SandboxImages;
  sandboxIsolation?: SandboxIsolation;
}

/**
 * Everything the simulator's parts are built from: the type only. The composition root (root.ts, serve.ts)
 * builds it once, complete; this file imports types alone, so any module may name it without importing what
 * builds it. No handler receives it whole: each route module's factory names the pieces it takes
 * (Pick<SimDeps, ...>) and the operations table (operations.ts) hands them in once; the arrows from the
 * folders below up to this file are those Picks (and the resource kinds').
 */
export interface SimDeps extends SimCore {
  readonly agents?: SandboxAgents;
  readonly images?: SandboxImages;
  readonly sandboxIsolation?: SandboxIsolation;
  /** What runs behind sandbox records: nothing (records only) or real agents. */
  readonly sandboxes: SandboxRuntime<OpContext>;
  /** Runs job executions' tasks for real, or (records only) leaves them to their simulated plan. */
  readonly jobs: JobExecutor;
  /** Where sandbox schedules live: each sandbox's agent (real sandboxes), or records (records only). */
  readonly schedules: ScheduleBackend;
  /** To call with every supervisor event of a sandbox's agent: meters the sandbox's real run time. */
  onSandboxAgentEvent: (workspace: string, sandbox: string, event: SupervisorEvent) => void;
}
