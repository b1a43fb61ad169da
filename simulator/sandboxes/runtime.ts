import type { OpContext } from "../http/operation.js";
import type { ResourceDeps } from "../resources/kind.js";
import type { SandboxStorage } from "../resources/kinds/storage.js";

/** What a runtime reads of a sandbox record before it is stored. */
export interface SandboxRecordView {
  metadata: { name: string; labels?: unknown };
  spec: { volumes?: unknown };
  status?: string;
  events?: unknown[];
  __revision?: unknown;
}

/** The sandbox routes' and the sandbox kind's requests: what runs is created, changed, moved and removed with its record. */
export interface SandboxRequests<Ctx> {
  /** POST /sandboxes (the body is validated by the record's kind). */
  create(ctx: Ctx): unknown;
  /** PUT /sandboxes/{name}. */
  update(ctx: Ctx): unknown;
  /** POST /sandboxes/{name}/archive and /unarchive. */
  move(ctx: Ctx, plan: "archive" | "unarchive"): unknown;
  /** Where the SDK sends the sandbox's own calls (its metadata.url), under the simulator's base URL. */
  runUrl(base: string, workspace: string, name: string): string;
  /** A record about to be stored (the sandbox kind's prepare): may refuse it (an ApiError) or note what it needs. */
  preparing(ctx: Ctx, doc: SandboxRecordView): void;
  /** DELETE /sandboxes/{name}: as retire, and what the sandbox's labels granted it (drive permissions) is forgotten. */
  remove(workspace: string, name: string, onError: (err: Error) => void): void;
}

/** What the expiry sweep asks of what runs: is it starting, when was it last used, and retiring it. */
export interface SandboxExpiryRuntime {
  /** Whether the sandbox's agent is starting (expiry waits for it: a start is not cut short). */
  isStarting(workspace: string, name: string): boolean;
  /** When a request last went through the sandbox proxy to it in this process (0: never); expiry's last use. */
  lastUsedMs(workspace: string, name: string): number;
  /** Stops what runs for an expired sandbox and retires its files; errors go to `onError`. */
  retire(workspace: string, name: string, onError: (err: Error) => void): void;
}

/** What a workspace's deletion asks of what runs. */
export interface WorkspaceSandboxRetirement {
  /** A deleted workspace's sandboxes: stopped and their files retired; resolves once they are. */
  retireWorkspace(workspace: string, names: string[], onError: (err: Error) => void): Promise<void>;
}

/** Snapshots and forks: copies of a sandbox's files, and sandboxes started from them. */
export interface SandboxSnapshots<Ctx> {
  /** A snapshot's copy of the sandbox's root files, made before it is answered (records only: there are none). */
  saveSnapshot(workspace: string, snapshotId: string, name: string): Promise<void>;
  /** Removes a snapshot's copied files. */
  removeSnapshot(workspace: string, snapshotId: string): void;
  /** POST .../snapshots/{id}/restore: resolves once the sandbox's files are the snapshot's. */
  restoreSnapshot(ctx: Ctx, name: string, snapshotId: string): Promise<void>;
  /** A fork's new record, before it is stored (as a create's). */
  forking(ctx: Ctx, doc: SandboxRecordView): void;
  /** The stored fork starts from a live sandbox's or a snapshot's files; resolves once it is deployed. */
  startFork(ctx: Ctx, name: string, doc: SandboxRecordView, from: { copyFilesOf?: string; fromSnapshot?: string }): Promise<void>;
}

/** Standby (the sandbox kind's status, the test hooks' standby and forced statuses). */
export interface SandboxStandby {
  /** STANDBY while the sandbox's processes are stopped in place, RUNNING while it runs; undefined when nothing runs. */
  standbyState(workspace: string, name: string): "RUNNING" | "STANDBY" | undefined;
  /**
   * Puts a running sandbox in standby or wakes it now (POST /_sim/standby): "unsupported" when the launcher
   * cannot stop sandboxes in place, false when it failed.
   */
  setStandby(workspace: string, name: string, state: "RUNNING" | "STANDBY"): Promise<boolean | "unsupported">;
  /** A status forced by the test hooks (POST /_sim/transitions/step): what runs follows it (records only: nothing runs). */
  followForcedStatus(workspace: string, name: string, status: string): Promise<void>;
}

/** Where volumes' and drives' files live (the volume and drive kinds' hooks). */
export interface SandboxStorageHolder {
  readonly storage: SandboxStorage;
}

/** What /health says about sandbox starts. */
export interface SandboxStartsHealth {
  /** Admission and warm pool figures; undefined when nothing starts. */
  startsHealth(): object | undefined;
}

/**
 * What runs behind sandbox records: nothing (records-runtime.ts: statuses follow their simulated plans) or one
 * real sandbox-agent each (agent-runtime.ts); the composition root picks the implementation. It is the sum of
 * the small interfaces above, and each user (the routes, the sandbox kind, the expiry sweep, workspace deletion,
 * the test hooks, /health) takes only its own. `Ctx` is an operation's context (OpContext): a parameter, so that
 * SimDeps, which holds the runtime, and this file do not import each other.
 */
export interface SandboxRuntime<Ctx>
  extends
    SandboxRequests<Ctx>,
    SandboxExpiryRuntime,
    WorkspaceSandboxRetirement,
    SandboxSnapshots<Ctx>,
    SandboxStandby,
    SandboxStorageHolder,
    SandboxStartsHealth {}

/** The resource layer's dependencies with what runs behind sandbox records: what the sandbox routes and the sandbox kind's hooks use. */
export interface SandboxResourceDeps extends ResourceDeps {
  readonly sandboxes: SandboxRuntime<OpContext>;
}
