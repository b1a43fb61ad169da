import { ApiError, errors } from "../../src/errors.js";
import type { SandboxAgents } from "../agents/registry.js";
import type { OpContext } from "../http/operation.js";
import type { SandboxImageSource } from "../images/sandbox-images.js";
import { loadItem } from "../resources/crud.js";
import { sandboxKind } from "./kind.js";
import { afterUpdate, archive, awaitCreated, followForcedStatus, launchOptions, markDeploying, restoreSnapshot, unarchive } from "./agent-lifecycle.js";
import { createRecord, genericUpdate, type RecordHooks } from "./records-runtime.js";
import type { SandboxRecordView, SandboxRuntime } from "./runtime.js";
import { forgetWorkload, provisionDrive, recordWorkloadLabels, retireDrive } from "../agents/drives.js";
import { attachmentProblem, provisionVolume, removeVolume, type VolumeAttachment } from "../agents/volumes.js";
import { startsHealth } from "../agents/starts-health.js";
import { volumeInUse } from "./volume-use.js";
import type { SandboxResourceDeps } from "./runtime.js";

/** spec.runtime.image of a request body, as sent. */
const imageOf = (body: unknown) => (body as { spec?: { runtime?: { image?: unknown } } } | undefined)?.spec?.runtime?.image;

/**
 * A create that outlasts CREATE_WAIT_MS (an image built on first use) answers
 * 504 while the sandbox keeps deploying, as the platform's edge does: the SDK
 * then polls GET /sandboxes/{name} until DEPLOYED or FAILED (sandbox.js,
 * waitAfterCreateGatewayTimeout). Node's fetch would give up on its own at
 * 300 s without response headers.
 */
export const CREATE_WAIT_MS = 240_000;

export function withinCreateWait<T>(created: Promise<T>, name: string, waitMs = CREATE_WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new ApiError("service_unavailable", `sandbox "${name}" is still deploying (its image is being built): GET it until it is DEPLOYED`, {
            status: 504,
            details: { code: "GATEWAY_TIMEOUT" },
          }),
        ),
      waitMs,
    );
    timer.unref();
  });
  created.catch(() => {}); // settled after the 504: its outcome is in the sandbox's status and events
  return Promise.race([created, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Sandboxes with one real sandbox-agent each (simulator/agents); images checked at create when there is a store.
 * `shared` is what the generic record layer uses; the sandbox kind's hooks reach this runtime through it, so
 * it is completed with the runtime itself.
 */
export function agentSandboxes(agents: SandboxAgents, images: SandboxImageSource, shared: Omit<SandboxResourceDeps, "sandboxes">): SandboxRuntime<OpContext> {
  const hooks: RecordHooks = {
    // Brings back the agent of a sandbox that should have one (no-op while it runs or starts).
    reused: (ctx, item) => {
      if (item.status === "DEPLOYED" || item.status === "DEPLOYING") agents.begin(ctx.workspace, item.name, launchOptions(item.doc));
    },
    creating: (ctx, doc) => markDeploying(deps, ctx, doc),
    // Started now; calls through metadata.url wait until it is healthy.
    created: (ctx, doc) => agents.begin(ctx.workspace, doc.metadata.name, launchOptions(doc)),
  };
  const runtime: SandboxRuntime<OpContext> = {
    async create(ctx: OpContext) {
      // An image no source provides: 400 INVALID_IMAGE before any record exists, as the platform answers (no sandbox left behind).
      const image = imageOf(ctx.body);
      await images.check(typeof image === "string" ? image : undefined);
      // DEPLOYING until the sandbox's agent answers /health; the reply waits for DEPLOYED (the SDK's create expects it).
      const doc = createRecord(deps, ctx, hooks);
      return withinCreateWait(awaitCreated(deps, ctx, agents, doc.metadata.name), doc.metadata.name);
    },
    async update(ctx: OpContext) {
      // Read before the update: the store may hand the update the same (cached) item object.
      const { name, doc, status } = loadItem(deps, sandboxKind, ctx, ctx.params.sandboxName!, "");
      const image = imageOf(ctx.body);
      // A new image must exist (the default error shape here: numeric code, the reason in the message).
      if (typeof image === "string" && image !== launchOptions(doc).image) {
        await images.check(image).catch((err: unknown) => {
          throw err instanceof ApiError ? errors.badRequest(`INVALID_IMAGE: ${err.message}`) : err;
        });
      }
      await update.handler(ctx);
      // A new spec.network applies to the running sandbox at once (simulator/egress): no restart.
      await agents.applyNetwork(ctx.workspace, name);
      return afterUpdate(deps, ctx, agents, name, doc, status);
    },
    move: (ctx, plan) => (plan === "archive" ? archive(deps, ctx, agents, ctx.params.sandboxName!) : unarchive(deps, ctx, agents, ctx.params.sandboxName!)),
    isStarting: (workspace, name) => agents.get(workspace, name)?.state === "starting",
    lastUsedMs: (workspace, name) => agents.lastUsedMs(workspace, name) ?? 0,
    retire: (workspace, name, onError) => agents.retire(workspace, name, onError),
    remove(workspace, name, onError) {
      forgetWorkload(agents, workspace, name);
      agents.retire(workspace, name, onError);
    },
    retireWorkspace: (workspace, names, onError) => agents.retireWorkspace(workspace, names, onError),
    runUrl: (base, workspace, name) => `${base}/sbx/${workspace}/${name}`, // served by the sandbox proxy
    preparing(ctx, doc) {
      checkVolumeAttachments(deps, doc, ctx);
      // Drive permissions match these labels at mount time (agents/drives.ts, sandbox-agent/drives/access.ts).
      recordWorkloadLabels(agents, ctx.workspace, doc.metadata.name, doc.metadata.labels as Record<string, unknown> | undefined);
    },
    standbyState: (workspace, name) => agents.standbyState(workspace, name),
    setStandby: async (workspace, name, state) => (agents.standby ? agents.setStandby(workspace, name, state) : "unsupported"),
    startsHealth: () => startsHealth(agents),
    storage: {
      provisionVolume: (workspace, volume, sizeMb, mountedBy) =>
        provisionVolume(agents.dir, workspace, volume, sizeMb, volumeInUse(agents, workspace, mountedBy)),
      removeVolume: (workspace, volume) => removeVolume(agents.dir, workspace, volume),
      provisionDrive: (workspace, drive, permissions) => provisionDrive(agents, workspace, drive, permissions),
      retireDrive: (workspace, sandboxes, drive) => retireDrive(agents, workspace, sandboxes, drive),
    },
    saveSnapshot: (workspace, snapshotId, name) => agents.snapshots.save(workspace, snapshotId, agents.rootDir(workspace, name)),
    removeSnapshot: (workspace, snapshotId) => agents.snapshots.remove(workspace, snapshotId),
    restoreSnapshot: (ctx, name, snapshotId) => restoreSnapshot(deps, ctx, agents, name, snapshotId),
    forking: (ctx, doc) => markDeploying(deps, ctx, doc),
    async startFork(ctx, name, doc, from) {
      agents.begin(ctx.workspace, name, { ...launchOptions(doc), ...from });
      await awaitCreated(deps, ctx, agents, name);
    },
    followForcedStatus: (workspace, name, status) => followForcedStatus(deps, agents, workspace, name, status),
  };
  const deps: SandboxResourceDeps = { ...shared, sandboxes: runtime };
  const update = genericUpdate(deps);
  return runtime;
}

/** With real agents, spec.volumes become mounts: each must name an existing volume and an absolute mountPath. */
function checkVolumeAttachments(deps: Pick<SandboxResourceDeps, "resources">, doc: SandboxRecordView, ctx: OpContext): void {
  const attachments = (doc.spec.volumes ?? []) as VolumeAttachment[];
  attachments.forEach((a, i) => {
    const problem = attachmentProblem(a, i);
    if (problem) throw errors.badRequest(problem);
    if (!deps.resources.get(ctx.workspace, "volume", a.name!))
      throw errors.badRequest(`spec.volumes[${i}].name: volume "${a.name}" not found in workspace "${ctx.workspace}"`);
  });
  const targets = attachments.map((a) => a.mountPath!.replace(/\/+$/, ""));
  const twice = targets.find((t, i) => targets.indexOf(t) !== i);
  if (twice) throw errors.badRequest(`spec.volumes: two volumes are mounted at "${twice}"`);
}
