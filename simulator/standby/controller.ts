import type { Logger } from "../../src/logging.js";
import { IdleTracker, runningKeepAlive, scheduleWakeAt, type StandbyState } from "./idle.js";

/**
 * Standby (docs/launchers.md, README "Standby"): a sandbox idle for `afterMs` (no request, no open
 * connection, no running keepAlive process) has every process stopped in place by its launcher
 * (AgentHandle.freeze); any request, a due schedule or a test hook resumes it (thaw) before it is served.
 * Real time, checked every `tickMs`; one transition at a time per sandbox.
 */

/** What the controller needs of a sandbox's running agent. */
export interface FreezableAgent {
  readonly canFreeze: boolean;
  freeze(): Promise<void>;
  thaw(): Promise<void>;
}

export interface StandbyOptions {
  afterMs: number;
  /** Real time (Date.now); a fake clock in tests. */
  now?: () => number;
  /** How often idle sandboxes are looked for (default 250 ms; 0 = only on demand, tick()). */
  tickMs?: number;
  agent(key: string): FreezableAgent | undefined;
  /** GET `path` on the sandbox's agent, its JSON body (the processes and schedules it reports). */
  agentJson(key: string, path: string): Promise<unknown>;
  /** Each change of state (key = "<workspace>/<sandbox>"), at the clock's time: usage metering, events. */
  onChange?(key: string, state: StandbyState, atMs: number): void;
  logger?: Logger;
}

interface SchedulePage {
  data?: { nextRunAt?: string | null }[];
  meta?: { hasMore?: boolean; nextCursor?: string };
}

export class StandbyController {
  readonly tracker: IdleTracker;
  private readonly now: () => number;
  /** The transition (freeze or thaw) under way per sandbox: the next one waits for it. */
  private readonly busy = new Map<string, Promise<unknown>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: StandbyOptions) {
    this.now = options.now ?? Date.now;
    this.tracker = new IdleTracker(options.afterMs, this.now);
    const tickMs = options.tickMs ?? 250;
    if (tickMs > 0 && options.afterMs > 0) {
      this.timer = setInterval(() => void this.tick(), tickMs);
      this.timer.unref();
    }
  }

  /** A sandbox's agent is up (started, restarted): awake, its idle time counted from now. */
  add(key: string): void {
    this.tracker.add(key);
  }

  /** Its agent stops (the handle's stop thaws a sleeping sandbox before SIGTERM). */
  remove(key: string): void {
    this.tracker.remove(key);
  }

  state(key: string): StandbyState | undefined {
    return this.tracker.state(key);
  }

  touch(key: string): void {
    this.tracker.touch(key);
  }

  open(key: string): () => void {
    return this.tracker.open(key);
  }

  /**
   * Resumes the sandbox if it sleeps (or is going to sleep), then counts this as use. Never rejects.
   * `agent`: the one to resume when the registry no longer lists it (a stop under way).
   */
  async wake(key: string, agent?: FreezableAgent): Promise<void> {
    this.tracker.touch(key);
    if (this.tracker.state(key) !== "STANDBY" && !this.busy.has(key)) return;
    await this.exclusive(key, async () => {
      if (this.tracker.state(key) !== "STANDBY") return;
      try {
        await (agent ?? this.options.agent(key))?.thaw();
      } catch (err) {
        this.options.logger?.error({ sandbox: key, err: (err as Error).message }, "standby: resuming the sandbox failed");
      }
      this.tracker.setState(key, "RUNNING");
      this.options.onChange?.(key, "RUNNING", this.now());
    });
  }

  /**
   * Puts the sandbox to sleep: unless `force`, only while it is still idle once its agent has said it runs
   * no keepAlive process (a running one counts as use). True when it sleeps now.
   */
  async sleep(key: string, force = false): Promise<boolean> {
    return this.exclusive(key, async () => {
      const agent = this.options.agent(key);
      if (this.tracker.state(key) !== "RUNNING" || !agent?.canFreeze) return this.tracker.state(key) === "STANDBY";
      let wakeAt: number | undefined;
      try {
        if (!force) {
          const processes = (await this.options.agentJson(key, "/process")) as { status?: string; keepAlive?: boolean }[];
          if (runningKeepAlive(Array.isArray(processes) ? processes : []) > 0) {
            this.tracker.touch(key);
            return false;
          }
          // A request or a connection that came while the agent was asked keeps it awake.
          if (!this.tracker.dueForStandby().includes(key)) return false;
        }
        // Forced (the test hook), a schedule list the agent cannot give in time does not keep the sandbox awake:
        // it sleeps without a wake-up time, and a request or the hook wakes it.
        wakeAt = scheduleWakeAt(force ? await this.nextRuns(key).catch(() => []) : await this.nextRuns(key));
        // A run due within the wake lead (or overdue): asleep now, it would only wake again at once.
        if (!force && wakeAt !== undefined && wakeAt <= this.now()) {
          this.tracker.touch(key);
          return false;
        }
      } catch (err) {
        // An agent that cannot say (busy, restarting) is left awake this time.
        this.options.logger?.debug({ sandbox: key, err: (err as Error).message }, "standby: the agent could not be asked; the sandbox stays awake");
        this.tracker.touch(key);
        return false;
      }
      try {
        await agent.freeze();
      } catch (err) {
        this.options.logger?.warn({ sandbox: key, err: (err as Error).message }, "standby: stopping the sandbox failed; resuming it");
        await agent.thaw().catch(() => undefined);
        this.tracker.touch(key);
        return false;
      }
      this.tracker.setState(key, "STANDBY", wakeAt);
      this.options.onChange?.(key, "STANDBY", this.now());
      return true;
    });
  }

  /** One pass: sleeping sandboxes with a schedule due wake, idle ones go to sleep. */
  async tick(): Promise<void> {
    const wakes = this.tracker.dueForWake().map((key) => this.wake(key));
    const sleeps = this.tracker
      .dueForStandby()
      .filter((key) => !this.busy.has(key))
      .map((key) => this.sleep(key));
    await Promise.all([...wakes, ...sleeps]);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Every schedule's next run, read from the agent's GET /schedules pages. */
  private async nextRuns(key: string): Promise<(string | null | undefined)[]> {
    const runs: (string | null | undefined)[] = [];
    let cursor = "";
    for (let pages = 0; pages < 50; pages++) {
      const page = (await this.options.agentJson(key, `/schedules?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)) as SchedulePage;
      for (const s of page.data ?? []) runs.push(s.nextRunAt);
      if (!page.meta?.hasMore || !page.meta.nextCursor) break;
      cursor = page.meta.nextCursor;
    }
    return runs;
  }

  private exclusive<T>(key: string, work: () => Promise<T>): Promise<T> {
    const run = (this.busy.get(key) ?? Promise.resolve()).then(work, work);
    const settled = run.catch(() => undefined);
    this.busy.set(key, settled);
    void settled.then(() => {
      if (this.busy.get(key) === settled) this.busy.delete(key);
    });
    return run;
  }
}
