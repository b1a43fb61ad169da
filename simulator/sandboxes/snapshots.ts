import { randomBytes } from "node:crypto";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { toIso as iso } from "../../src/clock.js";
import { Reply, type Operation, type OpContext } from "../http/operation.js";
import { buildNew, insertChild, insertNew, loadItem } from "../resources/crud.js";
import type { ResourceDoc } from "../resources/kind.js";
import { sandboxKind } from "./kind.js";
import { dropTerminated } from "./expiry.js";
import { listResources } from "../resources/listing.js";
import { nameSchema } from "../resources/metadata.js";
import type { SandboxResourceDeps } from "./runtime.js";

/**
 * Sandbox snapshots, restore, and fork into a new sandbox from the source's
 * spec. With real agents a snapshot is a copy of the sandbox's root files
 * (not its mounted drives) in the simulator's data dir, made before the
 * snapshot is answered `ready`; fork and restore copy them back in, delete
 * removes them. Without agents (records only) there are no files to keep.
 */
export const SNAPSHOT_KIND = "sandbox-snapshot";

interface Snapshot {
  id: string;
  name: string;
  status: "pending" | "ready" | "failed";
  workspace: string;
  createdAt: string;
  createdBy: string;
  sandboxName: string;
  source: { name: string; kind: "sandbox"; deleted?: boolean };
  spec: { generation?: unknown; image?: unknown; memory?: unknown; ports?: unknown; region?: unknown; volumes?: unknown };
}

const SnapshotBody = z.strictObject({
  name: nameSchema.optional(),
  source: z.looseObject({ name: z.string().optional(), kind: z.literal("sandbox").optional() }).optional(),
});
const ForkBody = z.strictObject({
  targetName: nameSchema,
  targetType: z.enum(["sandbox", "application"]).optional(),
  port: z.number().int().optional(),
  traffic: z.number().optional(),
  prefix: z.string().optional(),
  customDomain: z.string().optional(),
  snapshotId: z.string().optional(),
  envs: z.array(z.looseObject({})).optional(),
});

async function snapshotOf(deps: SandboxResourceDeps, ctx: OpContext, sandbox: ResourceDoc, name: string | undefined): Promise<Snapshot> {
  const runtime = (sandbox.spec.runtime ?? {}) as Record<string, unknown>;
  const id = `snap-${randomBytes(6).toString("hex")}`;
  const snapshot: Snapshot = {
    id,
    name: name ?? id,
    status: "ready",
    workspace: ctx.workspace,
    createdAt: iso(deps.clock.now()),
    createdBy: ctx.actor,
    sandboxName: sandbox.metadata.name,
    source: { name: sandbox.metadata.name, kind: "sandbox" },
    spec: {
      generation: runtime.generation,
      image: runtime.image,
      memory: runtime.memory,
      ports: runtime.ports,
      region: sandbox.spec.region,
      volumes: sandbox.spec.volumes,
    },
  };
  const exists = () => errors.conflict(`snapshot "${snapshot.name}" already exists`);
  if (deps.resources.get(ctx.workspace, SNAPSHOT_KIND, snapshot.name)) throw exists();
  await deps.sandboxes.saveSnapshot(ctx.workspace, id, sandbox.metadata.name);
  insertChild(deps, ctx, { kind: SNAPSHOT_KIND, parent: "", name: snapshot.name, status: "ready", doc: snapshot }, () => {
    deps.sandboxes.removeSnapshot(ctx.workspace, id); // the saved files of a snapshot that lost the race for its name
    return exists();
  });
  meterSnapshot(deps, ctx, snapshot);
  return snapshot;
}

/**
 * Snapshot storage (account metrics): billed while the snapshot exists, by
 * its size taken as the sandbox's memory (spec.memory MB, 4096 by default):
 * a sandbox snapshot keeps its memory state, billed at that size.
 */
function meterSnapshot(deps: SandboxResourceDeps, ctx: OpContext, snapshot: Snapshot): void {
  const memory = typeof snapshot.spec.memory === "number" && snapshot.spec.memory > 0 ? snapshot.spec.memory : 4096;
  deps.meter.start(
    { workspace: ctx.workspace, resourceType: "sandbox", resourceName: snapshot.name, resourceUuid: snapshot.id },
    "sandbox_snapshot_storage_gbs",
    memory / 1024,
  );
}

function findSnapshot(deps: SandboxResourceDeps, ctx: OpContext, key: string, sandbox?: string): Snapshot {
  const all = deps.resources.list<Snapshot>({ workspace: ctx.workspace, kind: SNAPSHOT_KIND, sort: "createdAt:desc" }).map((s) => s.doc);
  const found = all.find((s) => (s.id === key || s.name === key) && (!sandbox || s.sandboxName === sandbox));
  if (!found) throw errors.notFound(`snapshot "${key}" not found`);
  return found;
}

/** The record, its copied files and its storage metering go together. */
function removeSnapshot(deps: SandboxResourceDeps, ctx: OpContext, snap: Snapshot): void {
  deps.resources.delete(ctx.workspace, SNAPSHOT_KIND, snap.name);
  deps.sandboxes.removeSnapshot(ctx.workspace, snap.id);
  deps.meter.stop(snap.id);
}

/**
 * A fork is a new sandbox with the source's spec. With real agents it gets
 * its own agent (DEPLOYING until healthy, the reply waits) and, forked from a
 * live sandbox, a copy of that sandbox's files; forked from a stored
 * snapshot, a copy of the snapshot's files.
 */
function fork(deps: SandboxResourceDeps, ctx: OpContext, source: ResourceDoc, snapshotId: string, liveSource?: string, fromSnapshot?: string): unknown {
  const body = parse(ForkBody, ctx.body ?? {}, "body");
  if (body.targetType === "application") throw errors.badRequest("targetType: forking into an application is not simulated");
  const doc = buildNew(deps, sandboxKind, { ...ctx, body: { metadata: { name: body.targetName }, spec: source.spec } }, "");
  deps.sandboxes.forking(ctx, doc);
  dropTerminated(deps, ctx.workspace, body.targetName);
  insertNew(deps, sandboxKind, ctx, "", doc);
  const reply = { name: body.targetName, snapshotId: body.snapshotId ?? snapshotId, type: "sandbox" };
  return deps.sandboxes.startFork(ctx, body.targetName, doc, { copyFilesOf: liveSource, fromSnapshot }).then(() => reply);
}

export function snapshotOperations(deps: SandboxResourceDeps): Operation[] {
  return [
    {
      id: "listSandboxSnapshots",
      method: "get",
      path: "/sandboxes/:sandboxName/snapshots",
      scope: "sandboxes:get",
      handler: (ctx) => {
        const sandbox = loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "");
        return deps.resources
          .list<Snapshot>({ workspace: ctx.workspace, kind: SNAPSHOT_KIND, sort: "createdAt:desc" })
          .map((s) => s.doc)
          .filter((s) => s.sandboxName === sandbox.name);
      },
    },
    {
      id: "createSandboxSnapshot",
      method: "post",
      path: "/sandboxes/:sandboxName/snapshots",
      scope: "sandboxes:control",
      handler: (ctx) =>
        snapshotOf(deps, ctx, loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "").doc, parse(SnapshotBody, ctx.body ?? {}, "body").name),
    },
    {
      id: "deleteSandboxSnapshot",
      method: "delete",
      path: "/sandboxes/:sandboxName/snapshots/:snapshotId",
      scope: "sandboxes:control",
      handler: (ctx) => {
        const snap = findSnapshot(deps, ctx, ctx.params.snapshotId!, ctx.params.sandboxName);
        removeSnapshot(deps, ctx, snap);
        return new Reply(204);
      },
    },
    {
      id: "restoreSandboxSnapshot",
      method: "post",
      path: "/sandboxes/:sandboxName/snapshots/:snapshotId/restore",
      scope: "sandboxes:control",
      handler: (ctx) => {
        loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "");
        const snap = findSnapshot(deps, ctx, ctx.params.snapshotId!, ctx.params.sandboxName);
        const reply = { name: ctx.params.sandboxName!, snapshotId: snap.id };
        return deps.sandboxes.restoreSnapshot(ctx, ctx.params.sandboxName!, snap.id).then(() => reply);
      },
    },
    {
      id: "forkSandbox",
      method: "post",
      path: "/sandboxes/:sandboxName/fork",
      scope: "sandboxes:create",
      handler: (ctx) => {
        const source = loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "").doc;
        return snapshotOf(deps, ctx, source, undefined).then((snap) => fork(deps, ctx, source, snap.id, ctx.params.sandboxName!));
      },
    },
    {
      id: "listSnapshots",
      method: "get",
      path: "/snapshots",
      scope: "sandboxes:list",
      handler: (ctx) => listResources(deps, ctx, { kind: SNAPSHOT_KIND, shape: "versioned" }, (row) => row.doc),
    },
    {
      id: "createSnapshot",
      method: "post",
      path: "/snapshots",
      scope: "sandboxes:control",
      handler: (ctx) => {
        const body = parse(SnapshotBody, ctx.body ?? {}, "body");
        if (!body.source?.name) throw errors.badRequest("source.name: required (the sandbox to snapshot)");
        return snapshotOf(deps, ctx, loadItem(deps, sandboxKind, ctx, body.source.name, "").doc, body.name);
      },
    },
    {
      id: "getSnapshot",
      method: "get",
      path: "/snapshots/:snapshotName",
      scope: "sandboxes:get",
      handler: (ctx) => findSnapshot(deps, ctx, ctx.params.snapshotName!),
    },
    {
      id: "deleteSnapshot",
      method: "delete",
      path: "/snapshots/:snapshotName",
      scope: "sandboxes:control",
      handler: (ctx) => {
        const snap = findSnapshot(deps, ctx, ctx.params.snapshotName!);
        removeSnapshot(deps, ctx, snap);
        return new Reply(204);
      },
    },
    {
      id: "forkSnapshot",
      method: "post",
      path: "/snapshots/:snapshotName/fork",
      scope: "sandboxes:create",
      handler: (ctx) => {
        const snap = findSnapshot(deps, ctx, ctx.params.snapshotName!);
        const spec = {
          region: snap.spec.region,
          runtime: { image: snap.spec.image, memory: snap.spec.memory, ports: snap.spec.ports, generation: snap.spec.generation },
          volumes: snap.spec.volumes,
        };
        return fork(deps, ctx, { metadata: { name: snap.sandboxName }, spec: JSON.parse(JSON.stringify(spec)) } as ResourceDoc, snap.id, undefined, snap.id);
      },
    },
  ];
}
