import type { z } from "zod";
import type { PageLimits } from "../../src/pagination.js";
import type { SimDeps } from "../deps.js";
import type { OpContext } from "../http/operation.js";
import type { StoredResource } from "../store/resources.js";
import type { DeploymentStatus } from "./lifecycle.js";
import type { ListShape } from "./listing.js";
import type { Metadata } from "./metadata.js";

/**
 * One workspace resource kind, declared as data: the generic CRUD layer
 * (crud.ts) turns it into list/create/get/update/delete operations. Adding a
 * kind = one file in resources/kinds/ exporting a ResourceKind, listed in
 * resources/kinds/index.ts. See docs/simulator.md.
 */
export interface ResourceDoc {
  metadata: Metadata;
  spec: Record<string, unknown>;
  status?: string;
  events?: unknown[];
  [key: string]: unknown;
}

/**
 * What the generic CRUD layer (crud.ts) and the kinds' hooks use, handed in where the operations table is built
 * (operations.ts, from the composition root): a kind's hook gets it as an argument, never from the request.
 */
export type ResourceDeps = Pick<
  SimDeps,
  "db" | "resources" | "clock" | "ids" | "testHooks" | "cursors" | "urls" | "logger" | "config" | "sandboxes" | "jobs" | "accounts" | "meter"
>;

export interface ResourceKind {
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
  generateName?: (ctx: OpContext, deps: ResourceDeps) => string;
  /** Fills defaults and derived fields (url, region...) on create and update. */
  prepare?: (doc: ResourceDoc, ctx: OpContext, deps: ResourceDeps, previous?: ResourceDoc) => void;
  /**
   * Provisions what the resource stands for outside the records (a volume's filesystem) after `prepare`, before
   * the record is written, on the generic create and update; awaited, so the work (mkfs, mount) never holds up
   * the simulator's other requests.
   */
  provision?: (doc: ResourceDoc, ctx: OpContext, deps: ResourceDeps, previous?: ResourceDoc) => Promise<void>;
  /** Secret masking; `show` is true only for an admin passing show_secrets=true. */
  mask?: (doc: ResourceDoc, show: boolean) => ResourceDoc;
  /** Fields that depend on the moment of reading (a sandbox's expiresIn): added to every read, never cached. */
  readFields?: (doc: ResourceDoc, ctx: OpContext, deps: ResourceDeps) => Record<string, unknown> | undefined;
  /** Runs before a get (with the item's name) or a list answers: time-driven changes the reader must see (a sandbox's expiry). */
  beforeRead?: (ctx: OpContext, deps: ResourceDeps, name?: string) => void;
  /** The list item form (e.g. lite sandboxes without events). */
  listItem?: (doc: ResourceDoc) => unknown;
  /** Error details for a duplicate name (e.g. {code: "VOLUME_ALREADY_EXISTS"}). */
  conflictDetails?: Record<string, unknown>;
  /** Child kinds stored under this resource, deleted with it. */
  children?: string[];
  /** Throws (409) when the resource may not be deleted now; may answer later (a promise) when it must ask the sandboxes' agents. */
  beforeDelete?: (item: StoredResource<ResourceDoc>, ctx: OpContext, deps: ResourceDeps) => void | Promise<void>;
  /** What DELETE answers; default: the resource (status DELETING for deployed kinds). */
  deleteReply?: (doc: ResourceDoc) => unknown;
}
