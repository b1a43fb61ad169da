import { isDeepStrictEqual } from "node:util";
import { errors } from "../../src/errors.js";
import { toIso as iso } from "../../src/clock.js";
import type { OpContext } from "../http/operation.js";
import type { ResourceDeps, ResourceDoc } from "../resources/kind.js";

/**
 * An application's revisions, as the platform keeps them (ApplicationSpec.image: "the backend generates a
 * revision from the spec-level compute (image, memory, envs, port) on every create/update — clients set the
 * compute here ... and never craft revisions by hand"): newest first, `spec.revision.active` naming the
 * first. An update whose compute is the active revision's makes none. A raw model that carries its compute
 * in `spec.revisions[0]` only (upstream's "raw ApplicationModel" test) is taken as that compute.
 */

export interface AppRevision {
  id: string;
  image: string;
  memory?: number;
  envs?: unknown[];
  port?: number;
  createdAt: string;
  createdBy?: string;
}

/** Revisions kept per application (the oldest go). */
const KEPT = 20;

interface AppSpec {
  image?: string;
  memory?: number;
  envs?: unknown[];
  port?: number;
  revisions?: Partial<AppRevision>[];
  revision?: Record<string, unknown>;
}

const computeOf = (r: Partial<AppRevision> | AppSpec | undefined) => ({ image: r?.image, memory: r?.memory, envs: r?.envs, port: r?.port });

export function reviseApplication(doc: ResourceDoc, ctx: OpContext, deps: Pick<ResourceDeps, "clock" | "ids">, previous?: ResourceDoc): void {
  const spec = doc.spec as AppSpec;
  const before = ((previous?.spec as AppSpec | undefined)?.revisions ?? []) as AppRevision[];
  const head = spec.revisions?.[0];
  const sent = computeOf(spec);
  const compute = sent.image === undefined && head?.image ? computeOf(head) : sent;
  if (typeof compute.image !== "string" || compute.image === "") {
    if (before.length === 0) throw errors.badRequest("spec.image: required (the container image the application runs)");
    spec.revisions = before;
    return;
  }
  const active = before[0];
  if (active && isDeepStrictEqual(dropUndefined(computeOf(active)), dropUndefined(compute))) {
    spec.revisions = before;
    spec.revision = { ...spec.revision, active: active.id };
    return;
  }
  const revision: AppRevision = {
    id: `rev-${deps
      .ids()
      .replace(/[^a-z0-9]/gi, "")
      .slice(-12)
      .toLowerCase()}`,
    ...(dropUndefined(compute) as { image: string }),
    createdAt: iso(deps.clock.now()),
    createdBy: ctx.actor,
  };
  spec.revisions = [revision, ...before].slice(0, KEPT);
  spec.revision = { ...spec.revision, active: revision.id };
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** GET /applications/{name}/revisions: the AppRevision list (newest first). */
export function applicationRevisions(doc: ResourceDoc): AppRevision[] {
  return ((doc.spec as AppSpec).revisions ?? []) as AppRevision[];
}
