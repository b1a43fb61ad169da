import { toIso as iso } from "../../src/clock.js";
import type { TransitionMode } from "../http/test-hooks-state.js";

/**
 * Deployment statuses move on the simulator's clock. A resource carries its
 * planned moves in `__pending`; reads settle the moves that are due, each
 * appending an event. Test hooks make moves immediate (mode "immediate") or
 * leave them for an explicit step (mode "manual").
 */
export type DeploymentStatus =
  | "DELETING"
  | "TERMINATED"
  | "FAILED"
  | "DEACTIVATED"
  | "DEACTIVATING"
  | "UPLOADING"
  | "BUILDING"
  | "DEPLOYING"
  | "DEPLOYED"
  | "BUILT"
  | "ARCHIVING"
  | "ARCHIVED"
  | "UNARCHIVING";

export const DEPLOYMENT_STATUSES: readonly DeploymentStatus[] = [
  "DELETING",
  "TERMINATED",
  "FAILED",
  "DEACTIVATED",
  "DEACTIVATING",
  "UPLOADING",
  "BUILDING",
  "DEPLOYING",
  "DEPLOYED",
  "BUILT",
  "ARCHIVING",
  "ARCHIVED",
  "UNARCHIVING",
];

export interface CoreEvent {
  type: string;
  status: string;
  message: string;
  revision: string;
  canaryRevision?: string;
  time: string;
}

export interface PendingMove {
  status: DeploymentStatus;
  /** Due time; null in manual mode (moves only when stepped). */
  atMs: number | null;
}

export interface Deployable {
  status?: string;
  events?: CoreEvent[];
  __pending?: PendingMove[];
  __revision?: number;
  [key: string]: unknown;
}

/** Gap between two moves in timed mode: UPLOADING → DEPLOYED takes 1.5 s (the issue asks for ≤ ~2 s). */
export const STEP_MS = 500;

/** The plans a deployment follows, by trigger. */
export const PLANS = {
  deploy: ["UPLOADING", "BUILDING", "DEPLOYING", "DEPLOYED"],
  redeploy: ["DEPLOYING", "DEPLOYED"],
  deactivate: ["DEACTIVATING", "DEACTIVATED"],
  archive: ["ARCHIVING", "ARCHIVED"],
  unarchive: ["UNARCHIVING", "DEPLOYED"],
} as const satisfies Record<string, readonly DeploymentStatus[]>;

function appendEvent(doc: Deployable, status: string, nowMs: number, message: string): void {
  const revision = `rev-${doc.__revision ?? 1}`;
  doc.events = [...(doc.events ?? []), { type: "deployment", status, message, revision, time: iso(nowMs) }];
}

/** Starts a plan: the first status applies now, the rest are scheduled (or applied at once). */
export function startPlan(doc: Deployable, plan: readonly DeploymentStatus[], nowMs: number, mode: TransitionMode): void {
  const [first, ...rest] = plan;
  doc.status = first;
  appendEvent(doc, first!, nowMs, `${first!.toLowerCase()}`);
  doc.__pending = rest.map((status, i) => ({ status, atMs: mode === "manual" ? null : nowMs + (i + 1) * STEP_MS }));
  if (mode === "immediate") settle(doc, Number.POSITIVE_INFINITY, nowMs);
}

/** Applies every move due at `nowMs`; returns whether anything changed. */
export function settle(doc: Deployable, dueMs: number, stampMs = dueMs): boolean {
  let changed = false;
  while (doc.__pending?.length) {
    const next = doc.__pending[0]!;
    if (next.atMs === null || next.atMs > dueMs) break;
    doc.__pending = doc.__pending.slice(1);
    doc.status = next.status;
    appendEvent(doc, next.status, Number.isFinite(next.atMs) ? Math.min(next.atMs, stampMs) : stampMs, next.status.toLowerCase());
    changed = true;
  }
  if (changed && doc.__pending?.length === 0) delete doc.__pending;
  return changed;
}

/** Applies the next planned move now, whatever its due time (test hook "step"). */
export function stepOnce(doc: Deployable, nowMs: number): boolean {
  const next = doc.__pending?.[0];
  if (!next) return false;
  doc.__pending = [{ ...next, atMs: nowMs }, ...doc.__pending!.slice(1)];
  return settle(doc, nowMs);
}

/** Sets a status directly (test hook), dropping planned moves. */
export function forceStatus(doc: Deployable, status: DeploymentStatus, nowMs: number, message = "set by test hook"): void {
  delete doc.__pending;
  doc.status = status;
  appendEvent(doc, status, nowMs, message);
}
