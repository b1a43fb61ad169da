import { z } from "zod";
import { randomBytes } from "node:crypto";
import { errors } from "../../../src/errors.js";
import { toIso as iso } from "../../../src/clock.js";
import type { ResourceStore } from "../../store/resources.js";
import type { ResourceDeps, ResourceDoc, ResourceKind } from "../kind.js";

/** Volumes, volume templates and drives: ready at once (no build). */

/**
 * Where volumes and drives live when sandboxes mount them (the agents runtime: directories in the simulator's
 * data dir, simulator/agents/volumes.ts and drives.ts); records only, they are records alone and this does nothing.
 */
export interface SandboxStorage {
  /**
   * A volume created or grown to `sizeMb`; `mountedBy` are the sandboxes that name it. Undefined, or why its
   * filesystem grows later (a sandbox with a started agent mounts it).
   */
  provisionVolume(workspace: string, volume: string, sizeMb: number, mountedBy: string[]): Promise<string | undefined>;
  removeVolume(workspace: string, volume: string): void;
  /** A drive created or updated, with the permissions its access file grants. */
  provisionDrive(workspace: string, drive: string, permissions: unknown[]): void;
  /** A drive deleted: refused (409) while a running sandbox of `sandboxes` has it mounted, then its files go. */
  retireDrive(workspace: string, sandboxes: string[], drive: string): Promise<void> | void;
}

/** What the volume and drive kinds' hooks need besides the records: the sandboxes' storage, where their files live. */
export interface StorageKindDeps extends ResourceDeps {
  sandboxes: { storage: SandboxStorage };
}

const mounts = (sandbox: ResourceDoc, volume: string) =>
  Array.isArray(sandbox.spec?.volumes) && (sandbox.spec.volumes as { name?: string }[]).some((v) => v.name === volume);

/** The sandboxes whose spec.volumes name `volume`, whatever their status. */
export function sandboxesNaming(resources: ResourceStore, workspace: string, volume: string): string[] {
  return resources
    .allOfKind<ResourceDoc>(workspace, ["sandbox"])
    .filter((s) => mounts(s.doc, volume))
    .map((s) => s.name);
}

/** Sandboxes whose spec.volumes name this volume (a terminated sandbox holds nothing). */
function attachedTo(doc: ResourceDoc, sandboxes: ResourceDoc[]): string | undefined {
  const user = sandboxes.find((s) => s.status !== "TERMINATED" && mounts(s, doc.metadata.name));
  return user ? `sandbox:${user.metadata.name}` : undefined;
}

export const volumeKind: ResourceKind<StorageKindDeps> = {
  kind: "volume",
  collection: "/volumes",
  param: "volumeName",
  ops: { list: "listVolumes", create: "createVolume", get: "getVolume", update: "updateVolume", delete: "deleteVolume" },
  scope: "volumes",
  spec: z.strictObject({ size: z.number().int().min(1).optional(), region: z.string().optional(), template: z.string().optional() }),
  lifecycle: "synchronous",
  // The platform provisions the block device first: DEPLOYING, then DEPLOYED on the clock (the SDK does not wait;
  // a sandbox may name a volume that is still DEPLOYING).
  createPlan: ["DEPLOYING", "DEPLOYED"],
  list: "versioned",
  statusFilter: true,
  conflictDetails: { code: "VOLUME_ALREADY_EXISTS" },
  prepare(doc, ctx, deps, previous) {
    doc.spec.size ??= 1024;
    doc.spec.region ??= "us-pdx-1";
    // Volumes only grow (control-plane.md §3.14).
    const before = previous?.spec.size as number | undefined;
    if (before !== undefined && (doc.spec.size as number) < before)
      throw errors.badRequest(`spec.size: a volume cannot shrink (${before} → ${String(doc.spec.size)})`);
    const sandboxes = deps.resources.allOfKind<ResourceDoc>(ctx.workspace, ["sandbox"]).map((s) => s.doc);
    doc.state = { attachedTo: attachedTo(doc, sandboxes) };
  },
  // With real sandboxes a volume is a directory they mount (simulator/agents/volumes.ts): made (mkfs, mount) or
  // grown without holding up the simulator's other requests.
  async provision(doc, ctx, deps) {
    const mountedBy = sandboxesNaming(deps.resources, ctx.workspace, doc.metadata.name);
    const pending = await deps.sandboxes.storage.provisionVolume(ctx.workspace, doc.metadata.name, doc.spec.size as number, mountedBy);
    // Accepted as on the platform (its resize is reconciled in the background); the filesystem follows as soon as it can.
    if (pending) {
      const message = `spec.size ${String(doc.spec.size)} MB: the filesystem grows once no sandbox mounts the volume (${pending}); the next sandbox to mount it gets the new size`;
      doc.events = [
        ...((doc.events as unknown[] | undefined) ?? []),
        { type: "resize", status: doc.status, message, revision: "rev-1", time: iso(deps.clock.now()) },
      ];
      deps.logger.info({ workspace: ctx.workspace, volume: doc.metadata.name, reason: pending }, "volume growth waits");
    }
  },
  // Refused (409) while a sandbox names it, as the platform does; then its files go with it.
  beforeDelete(item, ctx, deps) {
    const sandboxes = deps.resources.allOfKind<ResourceDoc>(ctx.workspace, ["sandbox"]).map((s) => s.doc);
    const user = attachedTo(item.doc, sandboxes);
    if (user) throw errors.conflict(`volume "${item.name}" is attached to ${user}`);
    deps.sandboxes.storage.removeVolume(ctx.workspace, item.name);
  },
  // Lists carry LiteVolume items.
  listItem: (doc) => ({
    metadata: {
      name: doc.metadata.name,
      displayName: doc.metadata.displayName,
      externalId: doc.metadata.externalId,
      createdAt: doc.metadata.createdAt,
      updatedAt: doc.metadata.updatedAt,
    },
    spec: { region: doc.spec.region, size: doc.spec.size },
    state: doc.state,
    status: doc.status,
  }),
};

export const volumeTemplateKind: ResourceKind = {
  kind: "volume-template",
  collection: "/volume_templates",
  param: "volumeTemplateName",
  ops: {
    list: "listVolumeTemplates",
    create: "createVolumeTemplate",
    get: "getVolumeTemplate",
    update: "updateVolumeTemplate",
    delete: "deleteVolumeTemplate",
  },
  scope: "volumeTemplates",
  spec: z.strictObject({ defaultSize: z.number().int().min(1).optional(), description: z.string().optional() }),
  extra: { versions: z.array(z.looseObject({})).optional() },
  lifecycle: "none",
  list: "bare",
  prepare(doc, ctx, _deps, previous) {
    const versions = ((previous?.versions ?? []) as Record<string, unknown>[]).slice();
    const version = typeof ctx.query.version === "string" ? ctx.query.version : undefined;
    if (version || !previous) {
      const name = version ?? "1";
      if (!versions.some((v) => v.name === name))
        versions.push({
          name,
          versionId: `${doc.metadata.name}-${name}`,
          status: "READY",
          bucket: "sim-volume-templates",
          region: "us-pdx-1",
          contentSize: 0,
          templateName: doc.metadata.name,
          workspace: ctx.workspace,
        });
    }
    doc.versions = versions;
    doc.state = { status: "ready", latestVersion: versions.at(-1)?.name, versionCount: versions.length, lastVersionUploadedAt: doc.metadata.updatedAt };
  },
};

export const driveKind: ResourceKind<StorageKindDeps> = {
  kind: "drive",
  collection: "/drives",
  param: "driveName",
  // createDriveAccessToken's token (scope `drive:<name>`) may read its own drive, nothing else.
  itemTokenScope: "drive",
  ops: { list: "listDrives", create: "createDrive", get: "getDrive", update: "updateDrive", delete: "deleteDrive" },
  spec: z.strictObject({
    region: z.string().optional(),
    size: z.number().int().optional(),
    permissions: z
      .array(
        z.strictObject({ labels: z.record(z.string(), z.unknown()).optional(), mode: z.enum(["read", "read-write"]).optional(), path: z.string().optional() }),
      )
      .max(3)
      .optional(),
  }),
  lifecycle: "synchronous",
  list: "versioned",
  statusFilter: true,
  generateName: () => `drive-${randomBytes(4).toString("hex")}`,
  conflictDetails: { code: "DRIVE_ALREADY_EXISTS" },
  prepare(doc, ctx, deps) {
    doc.spec.region ??= "us-pdx-1";
    doc.state = { s3Url: `s3://sim-drives/${doc.metadata.workspace}/${doc.metadata.name}` };
    // With real sandboxes a drive is a directory the workspace's agents mount (simulator/agents/drives.ts).
    deps.sandboxes.storage.provisionDrive(ctx.workspace, doc.metadata.name, (doc.spec.permissions as unknown[] | undefined) ?? []);
  },
  // Refused while a sandbox has it mounted; then its files go with it.
  beforeDelete(item, ctx, deps) {
    const sandboxes = deps.resources
      .allOfKind(ctx.workspace, ["sandbox"])
      .filter((s) => s.parent === "")
      .map((s) => s.name);
    return deps.sandboxes.storage.retireDrive(ctx.workspace, sandboxes, item.name);
  },
  deleteReply: (doc) => ({ message: `drive ${doc.metadata.name} deleted`, name: doc.metadata.name }),
};
