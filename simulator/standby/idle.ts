/**
 * Which sandboxes are due for standby, and which sleeping ones are due to wake, on an injected clock (real
 * time in the simulator, a fake one in tests). Pure bookkeeping: the controller (controller.ts) acts on it.
 *
 * The platform's rule (@blaxel/core's Sandbox doc: "automatically scale to zero after inactivity"; the
 * reference daemon's docs/LIFECYCLE.md): a sandbox stays awake while it serves requests, while a connection
 * to it is open (log and watch streams, WebSockets, a terminal) and while a keepAlive process runs.
 */

export type StandbyState = "RUNNING" | "STANDBY";

interface Idle {
  /** When it last served or ended a request, or was found held awake (clock ms). */
  lastActive: number;
  /** Connections through the proxy open now (a streaming reply, an upgraded socket). */
  open: number;
  state: StandbyState;
  /** While STANDBY: when it must wake for a due schedule (clock ms). */
  wakeAt?: number;
}

export class IdleTracker {
  private readonly sandboxes = new Map<string, Idle>();

  /** `afterMs`: idle time before standby; 0 = never. */
  constructor(
    readonly afterMs: number,
    private readonly now: () => number,
  ) {}

  /** A sandbox whose agent runs now: awake, its idle time counted from now. */
  add(key: string): void {
    this.sandboxes.set(key, { lastActive: this.now(), open: 0, state: "RUNNING" });
  }

  remove(key: string): void {
    this.sandboxes.delete(key);
  }

  has(key: string): boolean {
    return this.sandboxes.has(key);
  }

  state(key: string): StandbyState | undefined {
    return this.sandboxes.get(key)?.state;
  }

  /** A request, or anything else that counts as use: its idle time starts again. */
  touch(key: string): void {
    const idle = this.sandboxes.get(key);
    if (idle) idle.lastActive = Math.max(idle.lastActive, this.now());
  }

  /** A connection opens: the sandbox stays awake until every one has closed (the release, once). */
  open(key: string): () => void {
    const idle = this.sandboxes.get(key);
    if (!idle) return () => {};
    idle.open += 1;
    idle.lastActive = Math.max(idle.lastActive, this.now());
    let released = false;
    return () => {
      if (released) return;
      released = true;
      idle.open -= 1;
      idle.lastActive = Math.max(idle.lastActive, this.now());
    };
  }

  openConnections(key: string): number {
    return this.sandboxes.get(key)?.open ?? 0;
  }

  /** Marks the sandbox asleep (with the time it must wake for its next schedule) or awake (idle from now). */
  setState(key: string, state: StandbyState, wakeAt?: number): void {
    const idle = this.sandboxes.get(key);
    if (!idle) return;
    idle.state = state;
    idle.wakeAt = state === "STANDBY" ? wakeAt : undefined;
    if (state === "RUNNING") idle.lastActive = Math.max(idle.lastActive, this.now());
  }

  /** Awake sandboxes idle for afterMs with no open connection: candidates for standby (a keepAlive check follows). */
  dueForStandby(): string[] {
    if (this.afterMs <= 0) return [];
    const now = this.now();
    return [...this.sandboxes].filter(([, s]) => s.state === "RUNNING" && s.open === 0 && now - s.lastActive >= this.afterMs).map(([k]) => k);
  }

  /** Sleeping sandboxes whose wake time (a due schedule) has come. */
  dueForWake(): string[] {
    const now = this.now();
    return [...this.sandboxes].filter(([, s]) => s.state === "STANDBY" && s.wakeAt !== undefined && s.wakeAt <= now).map(([k]) => k);
  }
}

/** How early a sandbox wakes before its schedule is due: its agent's own timer must see the time come, not pass. */
export const SCHEDULE_WAKE_LEAD_MS = 1_000;

/**
 * When a sandbox going to sleep must wake: just before the earliest `nextRunAt` of its schedules (ISO
 * strings, null for none), or undefined when none is due. A time already past wakes it at once.
 */
export function scheduleWakeAt(nextRuns: (string | null | undefined)[], leadMs = SCHEDULE_WAKE_LEAD_MS): number | undefined {
  const due = nextRuns.map((t) => (t ? Date.parse(t) : NaN)).filter((ms) => Number.isFinite(ms));
  return due.length === 0 ? undefined : Math.min(...due) - leadMs;
}

/** Running keepAlive processes in an agent's GET /process list: each holds its sandbox awake (reference LIFECYCLE.md). */
export function runningKeepAlive(processes: { status?: string; keepAlive?: boolean }[]): number {
  return processes.filter((p) => p.keepAlive === true && p.status === "running").length;
}
