import type { z } from "zod";
import type { CursorCodec } from "../../src/cursor.js";
import type { Ids } from "../../src/ids.js";
import type { Logger } from "../../src/logging.js";
import type { PageLimits } from "../../src/pagination.js";
import type { Db } from "../../src/sqlite.js";
import type { SimClock } from "../clock.js";
import type { SimConfig } from "../config.js";
import type { OpContext } from "../http/operation.js";
import type { TestHooksState } from "../http/test-hooks-state.js";
import type { UsageMeter } from "../metrics/meter.js";
import type { AccountStore } from "../store/accounts.js";
import type { ResourceStore, StoredResource } from "../store/resources.js";
import type { DeploymentStatus } from "./lifecycle.js";
import type { ListShape } from "./listing.js";
import type { Metadata } from "./metadata.js";

/**
 * One workspace resource kind, declared as data: the generic CRUD layer
 * (crud.ts) turns it into list/create/get/update/delete operations. Adding a
 * kind = one file in resources/kinds/ exporting a ResourceKind, listed in
 * simulator/resource-kinds.ts. See docs/simulator.md.
 */
export interface ResourceDoc {
  metadata: Metadata;
  spec: Record<string, unknown>;
  status?: string;
  events?: unknown[];
  [key: string]: unknown;
}

/**
 * What the generic CRUD layer (crud.ts) reads, and what a kind's hooks get as an argument (never from the
 * request): the records, time, ids, cursors, the simulator's URL and settings, accounts and metering. A kind
 * whose hooks need more (a sandbox's runtime, a job's executor) names it in its own module as a wider D.
 */
export interface ResourceDeps {
  db: Db;
  resources: ResourceStore;
  clock: SimClock;
  ids: Ids;
  testHooks: TestHooksState;
  cursors: CursorCodec;
  /** The simulator's base URL (metadata.url, run URLs); set once it listens. */
  urls: { base: string };
  logger: Logger;
  config: SimConfig;
  accounts: AccountStore;
  meter: UsageMeter;
}

export interface ResourceKind<D extends ResourceDeps = ResourceDeps> {
  /** Store key, singular: "agent", "egress-gateway". */
  kind: string;
  /** Express path of the collection under /v0, with parent params: "/vpcs/:vpcName/egressgateways". */
  collection: string;
  /** Item path param: "agentName". */
  param: string;
  /** Params that identify the parent, in order; their values joined by "/" form the stored parent key. */
  parent?: { params: string[]; kind: string; label: string };
  /** SDK operation ids; an absent one is not served by the generic layer. */
  ops: { list?: string; create?: string; get?: string; update?: string; delete?: string };
  /** Scope resource ("agents" → agents:list, agents:create ...); undefined (or not in the seed) = `admin`. */
  scope?: string;
  /** A per-item token scope prefix that may read one item: "drive" → a `drive:<name>` token may GET that drive. */
  itemTokenScope?: string;
  /** Writable `spec` schema. Unknown spec fields → 400 unless the schema is loose. */
  spec: z.ZodType<Record<string, unknown>>;
  /** Other writable top-level fields kept on the document (e.g. volume `state`); read-only ones are always accepted and dropped. */
  extra?: Record<string, z.ZodType>;
  /** "deployment": UPLOADING → … → DEPLOYED on the clock; "synchronous": DEPLOYED at once; "none": no status. */
  lifecycle: "deployment" | "synchronous" | "none";
  /** A "synchronous" kind whose create still shows statuses before DEPLOYED, moving on the clock (volumes: DEPLOYING → DEPLOYED). */
  createPlan?: readonly DeploymentStatus[];
  list: ListShape;
  listLimits?: PageLimits;
  /** `?status=` filter on the list (validated against the deployment statuses). */
  statusFilter?: boolean;
  /** Statuses left out of lists unless the named query flag is true (sandboxes: TERMINATED, showTerminated). */
  hiddenStatuses?: { statuses: string[]; shownBy: string };
  /** Name rule when it differs from the common one (custom domains are DNS names). */
  name?: z.ZodType<string>;
  /** Name generated when metadata.name is absent; without it the name is required. */
  generateName?: (ctx: OpContext, deps: D) => string;
  /** Fills defaults and derived fields (url, region...) on create and update. */
  prepare?: (doc: ResourceDoc, ctx: OpContext, deps: D, previous?: ResourceDoc) => void;
  /**
   * Provisions what the resource stands for outside the records (a volume's filesystem) after `prepare`, before
   * the record is written, on the generic create and update; awaited, so the work (mkfs, mount) never holds up
   * the simulator's other requests.
   */
  provision?: (doc: ResourceDoc, ctx: OpContext, deps: D, previous?: ResourceDoc) => Promise<void>;
  /**
   * The statuses a "deployment" kind's create or update starts with, when a real workload (not the clock) moves
   * it on (applications with a runtime: DEPLOYING, then what the workload reports); undefined = the clock's plan.
   */
  deployPlan?: (doc: ResourceDoc, deps: D, previous?: ResourceDoc) => readonly DeploymentStatus[] | undefined;
  /** After the generic create or update has written the record (applications: start, restart or stop the workload). */
  afterWrite?: (doc: ResourceDoc, ctx: OpContext, deps: D, previous?: ResourceDoc) => void;
  /** Secret masking; `show` is true only for an admin passing show_secrets=true. */
  mask?: (doc: ResourceDoc, show: boolean) => ResourceDoc;
  /** Fields that depend on the moment of reading (a sandbox's expiresIn): added to every read, never cached. */
  readFields?: (doc: ResourceDoc, ctx: OpContext, deps: D) => Record<string, unknown> | undefined;
  /** Runs before a get (with the item's name) or a list answers: time-driven changes the reader must see (a sandbox's expiry). */
  beforeRead?: (ctx: OpContext, deps: D, name?: string) => void;
  /** The list item form (e.g. lite sandboxes without events). */
  listItem?: (doc: ResourceDoc) => unknown;
  /** Error details for a duplicate name (e.g. {code: "VOLUME_ALREADY_EXISTS"}). */
  conflictDetails?: Record<string, unknown>;
  /** Child kinds stored under this resource, deleted with it. */
  children?: string[];
  /** Throws (409) when the resource may not be deleted now; may answer later (a promise) when it must ask the sandboxes' agents. */
  beforeDelete?: (item: StoredResource<ResourceDoc>, ctx: OpContext, deps: D) => void | Promise<void>;
  /** What DELETE answers; default: the resource (status DELETING for deployed kinds). */
  deleteReply?: (doc: ResourceDoc) => unknown;
}

/** Any kind, where none of its hooks is called (its schema, names, paths and parent are read). */
export type AnyResourceKind = ResourceKind<never>;
