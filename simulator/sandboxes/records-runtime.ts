import { errors } from "../../src/errors.js";
import { queryBool } from "../../src/http.js";
import type { Operation, OpContext } from "../http/operation.js";
import { crudOperations, insertNew, loadItem, renderDoc, save, buildNew } from "../resources/crud.js";
import { PLANS, startPlan, type Deployable } from "../resources/lifecycle.js";
import type { ResourceDoc } from "../resources/kind.js";
import { sandboxKind } from "./kind.js";
import type { StoredResource } from "../store/resources.js";
import { dropTerminated } from "./expiry.js";
import type { SandboxRuntime } from "./runtime.js";
import type { SandboxResourceDeps } from "./runtime.js";

const NOT_REUSABLE = new Set(["FAILED", "TERMINATED", "TERMINATING"]);

/** What a create does beside the record: nothing here; agent-runtime.ts starts the sandbox's agent. */
export interface RecordHooks {
  /** createIfNotExist found the sandbox (and answers it). */
  reused(ctx: OpContext, item: StoredResource<ResourceDoc>): void;
  /** The new document, before it is stored. */
  creating(ctx: OpContext, doc: ResourceDoc): void;
  /** The new document, stored. */
  created(ctx: OpContext, doc: ResourceDoc): void;
}

const NO_HOOKS: RecordHooks = { reused() {}, creating() {}, created() {} };

/** The sandbox record of POST /sandboxes (createIfNotExist answers an existing one that can be reused). */
export function createRecord(deps: SandboxResourceDeps, ctx: OpContext, hooks: RecordHooks = NO_HOOKS): ResourceDoc {
  const doc = buildNew(deps, sandboxKind, ctx, "");
  dropTerminated(deps, ctx.workspace, doc.metadata.name);
  if (queryBool(ctx.query.createIfNotExist)) {
    const existing = deps.resources.get(ctx.workspace, "sandbox", doc.metadata.name);
    if (existing && !NOT_REUSABLE.has(existing.status)) {
      const item = loadItem(deps, sandboxKind, ctx, doc.metadata.name, "");
      hooks.reused(ctx, item);
      return renderDoc(deps, sandboxKind, item.doc, false, ctx);
    }
  }
  hooks.creating(ctx, doc);
  insertNew(deps, sandboxKind, ctx, "", doc);
  hooks.created(ctx, doc);
  return renderDoc(deps, sandboxKind, doc, false, ctx);
}

/** The generic update (validation, masked secrets kept); agent-runtime.ts then applies the new spec to the agent. */
export function genericUpdate(deps: SandboxResourceDeps): Operation {
  return crudOperations(deps, { ...sandboxKind, ops: { update: "updateSandbox" } })[0]!;
}

/** Archive and unarchive follow their simulated plan. */
function plannedMove(deps: SandboxResourceDeps, ctx: OpContext, plan: "archive" | "unarchive"): unknown {
  const item = loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "");
  const allowed = plan === "archive" ? ["DEPLOYED", "DEACTIVATED"] : ["ARCHIVED"];
  if (!allowed.includes(item.status)) throw errors.conflict(`sandbox "${item.name}" is ${item.status}; ${plan} needs ${allowed.join(" or ")}`);
  startPlan(item.doc as Deployable, PLANS[plan], deps.clock.now(), deps.testHooks.transitions);
  save(deps, item);
  return renderDoc(deps, sandboxKind, item.doc, false, ctx);
}

/**
 * Sandboxes as records only: their statuses follow simulated plans, nothing runs. `shared` is what the generic
 * record layer uses; the sandbox kind's hooks reach this runtime through it, so it is completed with the runtime itself.
 */
export function recordSandboxes(shared: Omit<SandboxResourceDeps, "sandboxes">): SandboxRuntime<OpContext> {
  const runtime: SandboxRuntime<OpContext> = {
    create: (ctx) => createRecord(deps, ctx),
    update: (ctx) => update.handler(ctx),
    move: (ctx, plan) => plannedMove(deps, ctx, plan),
    isStarting: () => false,
    lastUsedMs: () => 0,
    retire: () => {},
    remove: () => {},
    retireWorkspace: () => Promise.resolve(),
    // The records' own run URL (sandboxes/routes.ts answers the SDK's sandbox-local calls there).
    runUrl: (base, workspace, name) => `${base}/${workspace}/sandboxes/${name}`,
    preparing: () => {},
    standbyState: () => undefined,
    setStandby: () => Promise.resolve("unsupported"),
    startsHealth: () => undefined,
    storage: { provisionVolume: async () => undefined, removeVolume: () => {}, provisionDrive: () => {}, retireDrive: () => {} },
    // Records only: no files to keep, copy or restore, and a fork is DEPLOYED as it is stored.
    saveSnapshot: () => Promise.resolve(),
    removeSnapshot: () => {},
    restoreSnapshot: () => Promise.resolve(),
    forking: () => {},
    startFork: () => Promise.resolve(),
    followForcedStatus: () => Promise.resolve(),
  };
  const deps: SandboxResourceDeps = { ...shared, sandboxes: runtime };
  const update = genericUpdate(deps);
  return runtime;
}
