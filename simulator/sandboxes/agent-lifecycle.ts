import { mkdirSync, rmSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { errors } from "../../src/errors.js";
import { toIso as iso } from "../../src/clock.js";
import type { SandboxAgents } from "../agents/registry.js";

import { mountsUnder } from "../../src/mounts.js";
import type { VolumeAttachment } from "../agents/volumes.js";
import { envOf, recordStatus } from "./status.js";
import type { OpContext } from "../http/operation.js";
import { loadItem, renderDoc } from "../resources/crud.js";
import type { ResourceDoc } from "../resources/kind.js";
import { sandboxKind } from "./kind.js";
import type { SandboxRecordView } from "./runtime.js";
import type { SandboxResourceDeps } from "./runtime.js";

/**
 * A real sandbox's status follows its agent ("status and events
 * always tell the truth"): each operation that starts or stops the agent
 * records the in-between status at once (DEPLOYING, ARCHIVING, DEACTIVATING,
 * UNARCHIVING: what a GET sees meanwhile), then the end status once the agent
 * is healthy or stopped. The reply waits for the end, as create does (the
 * SDK's create expects DEPLOYED back). A start that fails leaves the sandbox
 * FAILED with the reason in its events and answers 503 naming the sandbox.
 */

/** What the agent is launched with (environment, image, volumes, memory): a change restarts it. */
export function launchOptions(doc: unknown): { env: Record<string, string>; image?: string; volumes?: VolumeAttachment[]; memoryMb?: number } {
  const spec = (doc as { spec?: { runtime?: { image?: string; memory?: unknown }; volumes?: VolumeAttachment[] } }).spec;
  const volumes = spec?.volumes?.length ? spec.volumes.map((v) => ({ name: v.name, mountPath: v.mountPath, readOnly: v.readOnly === true })) : undefined;
  const memory = typeof spec?.runtime?.memory === "number" && spec.runtime.memory > 0 ? spec.runtime.memory : undefined;
  return { env: envOf(doc as Parameters<typeof envOf>[0]), image: spec?.runtime?.image, volumes, ...(memory ? { memoryMb: memory } : {}) };
}

function reply(deps: SandboxResourceDeps, ctx: OpContext, name: string): ResourceDoc {
  return renderDoc(deps, sandboxKind, loadItem(deps, sandboxKind, ctx, name, "").doc, false, ctx);
}

/** Starts the agent (status DEPLOYED once it is healthy, through its "started" event) and waits for it. */
async function startAgent(deps: SandboxResourceDeps, ctx: OpContext, agents: SandboxAgents, name: string, doc: unknown): Promise<void> {
  // Deleted while its agent was stopping (a restart): no new agent for a sandbox that is gone.
  if (!deps.resources.get(ctx.workspace, "sandbox", name)) throw errors.notFound(`sandbox "${name}" not found (deleted meanwhile)`);
  agents.begin(ctx.workspace, name, launchOptions(doc));
  const failure = await agents.ensure(ctx.workspace, name);
  if (failure) throw errors.serviceUnavailable(`sandbox "${name}" in workspace "${ctx.workspace}": its agent did not start: ${failure}`);
}

/** A new sandbox with a real agent is DEPLOYING, not DEPLOYED, until its agent is healthy. */
export function markDeploying(deps: SandboxResourceDeps, ctx: OpContext, doc: SandboxRecordView): void {
  const event = {
    type: "deployment",
    status: "DEPLOYING",
    message: "deploying: starting the sandbox agent",
    revision: `rev-${(doc.__revision as number | undefined) ?? 1}`,
    time: iso(deps.clock.now()),
  };
  doc.status = "DEPLOYING";
  doc.events = [event];
}

/** Create: the record is DEPLOYING until the agent answers /health. */
export async function awaitCreated(deps: SandboxResourceDeps, ctx: OpContext, agents: SandboxAgents, name: string): Promise<ResourceDoc> {
  const failure = await agents.ensure(ctx.workspace, name);
  if (failure) throw errors.serviceUnavailable(`sandbox "${name}" was created but its agent did not start: ${failure}`);
  return reply(deps, ctx, name);
}

/** Archive: ARCHIVING, the agent stops (files kept), ARCHIVED. */
export function archive(deps: SandboxResourceDeps, ctx: OpContext, agents: SandboxAgents, name: string): Promise<ResourceDoc> {
  return agents.exclusive(ctx.workspace, name, async () => {
    const item = loadItem(deps, sandboxKind, ctx, name, "");
    if (!["DEPLOYED", "DEACTIVATED", "FAILED"].includes(item.status))
      throw errors.conflict(`sandbox "${name}" is ${item.status}; archive needs DEPLOYED, DEACTIVATED or FAILED`);
    recordStatus(deps, ctx.workspace, name, "ARCHIVING", "archiving: stopping the sandbox agent");
    await agents.stop(ctx.workspace, name);
    recordStatus(deps, ctx.workspace, name, "ARCHIVED", "archived: the sandbox agent is stopped, its files are kept");
    return reply(deps, ctx, name);
  });
}

/** Unarchive: UNARCHIVING, a new agent on the same files, DEPLOYED once healthy. */
export function unarchive(deps: SandboxResourceDeps, ctx: OpContext, agents: SandboxAgents, name: string): Promise<ResourceDoc> {
  return agents.exclusive(ctx.workspace, name, async () => {
    const item = loadItem(deps, sandboxKind, ctx, name, "");
    if (item.status !== "ARCHIVED") throw errors.conflict(`sandbox "${name}" is ${item.status}; unarchive needs ARCHIVED`);
    recordStatus(deps, ctx.workspace, name, "UNARCHIVING", "unarchiving: starting the sandbox agent on the kept files");
    await startAgent(deps, ctx, agents, name, item.doc);
    return reply(deps, ctx, name);
  });
}

const OFF = new Set(["DEACTIVATED", "DEACTIVATING"]);
/** Statuses whose agent an update leaves alone: archived sandboxes keep their files only, FAILED ones wait for a new create. */
const UNTOUCHED = new Set(["ARCHIVED", "ARCHIVING", "UNARCHIVING", "FAILED", "DELETING", "TERMINATED"]);

/**
 * After updateSandbox saved the new spec: `spec.enabled: false` deactivates
 * (DEACTIVATING, agent stopped, DEACTIVATED), enabling a deactivated sandbox
 * starts its agent again (files kept), and a change to what the agent is
 * launched with (spec.runtime.envs, image, memory, volumes) reboots it (reboot()).
 */
export function afterUpdate(
  deps: SandboxResourceDeps,
  ctx: OpContext,
  agents: SandboxAgents,
  name: string,
  previous: ResourceDoc,
  previousStatus: string,
): Promise<ResourceDoc> {
  return agents.exclusive(ctx.workspace, name, async () => {
    const item = loadItem(deps, sandboxKind, ctx, name, "");
    if (UNTOUCHED.has(previousStatus)) return reply(deps, ctx, name);
    const wantOff = (item.doc.spec as { enabled?: boolean }).enabled === false;
    const wasOff = OFF.has(previousStatus);
    if (wantOff && !wasOff) {
      recordStatus(deps, ctx.workspace, name, "DEACTIVATING", "deactivating: stopping the sandbox agent");
      await agents.stop(ctx.workspace, name);
      recordStatus(deps, ctx.workspace, name, "DEACTIVATED", "deactivated: the sandbox agent is stopped, its files are kept");
    } else if (!wantOff && wasOff) {
      recordStatus(deps, ctx.workspace, name, "DEPLOYING", "activating: starting the sandbox agent");
      await startAgent(deps, ctx, agents, name, item.doc);
    } else if (!wantOff && !isDeepStrictEqual(launchOptions(previous), launchOptions(item.doc))) {
      await reboot(deps, ctx, agents, name, item.doc, changedLaunchField(launchOptions(previous), launchOptions(item.doc)));
    }
    return reply(deps, ctx, name);
  });
}

/** Which of what the sandbox runs with an update changed, for its event. */
function changedLaunchField(before: ReturnType<typeof launchOptions>, after: ReturnType<typeof launchOptions>): string {
  if (!isDeepStrictEqual(before.env, after.env)) return "spec.runtime.envs";
  if (!isDeepStrictEqual(before.volumes, after.volumes)) return "spec.volumes";
  if (before.image !== after.image) return "spec.runtime.image";
  return "spec.runtime.memory";
}

/**
 * A change to what the sandbox runs with (envs, image, memory, volumes) reboots it, as on the
 * platform: the SDK's lifecycle test "updating environment variables reboots sandbox and clears
 * files" expects a file written before to be gone and the new envs in place, and the docs say
 * "Updating the image resets the sandbox state". The agent stops, the sandbox's own files (its
 * writable root) are removed, and a new agent starts on the image alone; volumes keep their data
 * (they are not the sandbox's files), and so does the agent's state (process records, schedules,
 * which the platform keeps in its control plane).
 */
async function reboot(deps: SandboxResourceDeps, ctx: OpContext, agents: SandboxAgents, name: string, doc: unknown, what: string): Promise<void> {
  recordStatus(deps, ctx.workspace, name, "DEPLOYING", `${what} changed: rebooting the sandbox (its files are reset)`);
  await agents.stop(ctx.workspace, name);
  let resetFailure: Error | undefined;
  try {
    resetFiles(agents, ctx.workspace, name);
  } catch (err) {
    resetFailure = err as Error;
  }
  await startAgent(deps, ctx, agents, name, doc);
  // Up again on its old files: the update applied, the reset did not, and the caller is told so.
  if (resetFailure) throw errors.internal(`sandbox "${name}" rebooted with its new spec, but its files could not be reset: ${resetFailure.message}`);
}

/**
 * A reboot's fresh filesystem: empties a stopped sandbox's writable root (the
 * overlay's upper layer over its image, or its whole root without one) and
 * the overlay's work dir; the agent's state stays. Refuses while the agent
 * runs or anything is mounted under the root (a drive's files would go too).
 */
function resetFiles(agents: SandboxAgents, workspace: string, name: string): void {
  if (agents.get(workspace, name)) throw new Error("its agent is still running");
  const root = agents.rootDir(workspace, name);
  const mounted = mountsUnder(root);
  if (mounted.length > 0) throw new Error(`still mounted under its root: ${mounted.join(", ")}`);
  rmSync(root, { recursive: true, force: true });
  rmSync(`${root}.overlay-work`, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
}

/** Statuses in which a sandbox has no running agent. */
const AGENTLESS = new Set(["DEACTIVATED", "ARCHIVED", "FAILED", "DELETING", "TERMINATED"]);

/**
 * A status forced by the test hooks (POST /_sim/transitions/step with
 * `status`) must not contradict the agent: forcing DEACTIVATED, ARCHIVED,
 * FAILED, DELETING or TERMINATED stops the agent (files kept), forcing DEPLOYED starts
 * it and waits until it is healthy (503 naming the sandbox when it cannot).
 * Other forced statuses (in-between ones) leave the agent as it is.
 */
export function followForcedStatus(
  deps: Pick<SandboxResourceDeps, "resources" | "clock">,
  agents: SandboxAgents,
  workspace: string,
  name: string,
  status: string,
): Promise<void> {
  if (!AGENTLESS.has(status) && status !== "DEPLOYED") return Promise.resolve();
  return agents.exclusive(workspace, name, async () => {
    const item = deps.resources.get(workspace, "sandbox", name);
    if (!item) return;
    if (AGENTLESS.has(status)) {
      if (!agents.get(workspace, name)) return;
      await agents.stop(workspace, name);
      recordStatus(deps, workspace, name, status, `${status.toLowerCase()} (forced by a test hook): the sandbox agent is stopped, its files are kept`);
      return;
    }
    agents.begin(workspace, name, launchOptions(item.doc));
    const failure = await agents.ensure(workspace, name);
    if (failure) {
      recordStatus(deps, workspace, name, "FAILED", `forced DEPLOYED (test hook) but the sandbox agent did not start: ${failure}`);
      throw errors.serviceUnavailable(`sandbox "${name}" in workspace "${workspace}": forced DEPLOYED but its agent did not start: ${failure}`);
    }
  });
}

/**
 * Restore: the sandbox's root becomes a copy of the snapshot's files. A
 * running agent is stopped first (its drives unmounted) and started again on
 * the restored files, the status DEPLOYING in between; a sandbox without an
 * agent (archived, deactivated) only gets its files replaced.
 */
export function restoreSnapshot(deps: SandboxResourceDeps, ctx: OpContext, agents: SandboxAgents, name: string, snapshotId: string): Promise<void> {
  return agents.exclusive(ctx.workspace, name, async () => {
    const item = loadItem(deps, sandboxKind, ctx, name, "");
    const running = agents.get(ctx.workspace, name) !== undefined;
    if (running) {
      recordStatus(deps, ctx.workspace, name, "DEPLOYING", `restoring snapshot ${snapshotId}: stopping the sandbox agent`);
      await agents.stop(ctx.workspace, name);
    }
    try {
      await agents.snapshots.restoreInto(ctx.workspace, snapshotId, agents.rootDir(ctx.workspace, name));
    } catch (err) {
      if (running) await startAgent(deps, ctx, agents, name, item.doc);
      throw errors.conflict(`sandbox "${name}": snapshot ${snapshotId} could not be restored: ${(err as Error).message}`);
    }
    if (running) await startAgent(deps, ctx, agents, name, item.doc);
    else recordStatus(deps, ctx.workspace, name, item.status, `restored snapshot ${snapshotId}: the sandbox's files were replaced`);
  });
}
