import type { Socket } from "node:net";
import type { AgentEndpoint } from "./endpoint.js";
import { DEFAULT_STOP_GRACE_MS } from "./child.js";
import { LaunchError, type AgentExit, type AgentHandle, type LaunchSpec, type Launcher } from "./types.js";

/**
 * Keeps one sandbox's agent running: starts it, restarts it with exponential
 * backoff when it crashes, and reports every crash and restart so the
 * simulator can append events and set the sandbox's status truthfully.
 */

export type AgentState = "starting" | "running" | "restarting" | "stopped" | "failed";

export type SupervisorEvent =
  /** The start waits for a free slot (StartQueue): `ahead` queued starts come first. */
  | { type: "queued"; ahead: number; running: number }
  | { type: "started"; url: string; pid?: number; socketPath?: string; placement?: string }
  | { type: "crashed"; exit: AgentExit; restartInMs: number | null; attempt: number }
  | { type: "restarted"; url: string; pid?: number; socketPath?: string; attempt: number; placement?: string }
  | { type: "restart-failed"; message: string; attempt: number; restartInMs: number | null }
  | { type: "gave-up"; attempts: number }
  | { type: "stopped"; exit: AgentExit };

export interface SupervisorOptions {
  onEvent?: (event: SupervisorEvent) => void;
  /** First restart delay, doubled per consecutive failure up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Consecutive failed restarts before giving up (status FAILED). */
  maxAttempts?: number;
  /** An agent that stayed up this long resets the backoff. */
  healthyAfterMs?: number;
  stopGraceMs?: number;
}

export class AgentSupervisor {
  private handle: AgentHandle | undefined;
  private _state: AgentState = "starting";
  private attempt = 0;
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private starting: Promise<void> | undefined;
  private readonly opts: Required<Omit<SupervisorOptions, "onEvent">> & Pick<SupervisorOptions, "onEvent">;

  constructor(
    private readonly launcher: Launcher,
    readonly spec: LaunchSpec,
    options: SupervisorOptions = {},
  ) {
    this.opts = {
      initialDelayMs: 200,
      maxDelayMs: 30_000,
      maxAttempts: 8,
      healthyAfterMs: 60_000,
      stopGraceMs: DEFAULT_STOP_GRACE_MS,
      ...options,
    };
  }

  get state(): AgentState {
    return this._state;
  }

  /** The agent's URL while it is running; undefined while it is down. */
  get url(): string | undefined {
    return this._state === "running" ? this.handle?.url : undefined;
  }

  /** Where the running agent answers (TCP URL or Unix socket); undefined while it is down. */
  get endpoint(): AgentEndpoint | undefined {
    const handle = this._state === "running" ? this.handle : undefined;
    return handle && { url: handle.url, socketPath: handle.socketPath };
  }

  /** The running agent's setDirectOutbound (AgentHandle), when its launcher gives one. */
  get setDirectOutbound(): ((on: boolean) => Promise<void>) | undefined {
    return this._state === "running" ? this.handle?.setDirectOutbound : undefined;
  }

  /** The running agent's openPort (AgentHandle), when its launcher gives one. */
  get openPort(): ((port: number) => Promise<Socket>) | undefined {
    return this._state === "running" ? this.handle?.openPort : undefined;
  }

  /** Whether the running agent's sandbox can be stopped in place (standby): its launcher gives freeze/thaw. */
  get canFreeze(): boolean {
    return this._state === "running" && this.handle?.freeze !== undefined && this.handle.thaw !== undefined;
  }

  /** Standby: every process of the sandbox stops where it is (AgentHandle.freeze). */
  async freeze(): Promise<void> {
    if (!this.canFreeze) throw new LaunchError(`the agent is ${this._state} or its launcher cannot stop it in place`);
    await this.handle!.freeze!();
  }

  /** Out of standby: the sandbox's processes go on (AgentHandle.thaw); nothing to do when the agent is not running. */
  async thaw(): Promise<void> {
    if (this._state === "running") await this.handle?.thaw?.();
  }

  get pid(): number | undefined {
    return this._state === "running" ? this.handle?.pid : undefined;
  }

  /** Host pid of the sandbox's PID-namespace init while running under an isolating launcher. */
  get sandboxPid(): number | undefined {
    return this._state === "running" ? this.handle?.sandboxPid : undefined;
  }

  /**
   * First start: rejects (state "failed") when the agent cannot be started at
   * all, or when stop() came while it was starting (the agent is stopped, not adopted).
   */
  start(): Promise<void> {
    this.starting ??= (async () => {
      let handle: AgentHandle;
      try {
        handle = await this.launcher.start(this.spec);
      } catch (err) {
        if (this._state !== "stopped") this._state = "failed";
        throw err;
      }
      if (this._state === "stopped") {
        await handle.stop(this.opts.stopGraceMs);
        throw new LaunchError("the agent was stopped while it was starting");
      }
      this.adopt(handle);
      this.emit({ type: "started", url: handle.url, pid: handle.pid, socketPath: handle.socketPath, placement: handle.placement });
    })();
    return this.starting;
  }

  /** SIGTERM, then SIGKILL after the grace period (default the supervisor's stopGraceMs). */
  async stop(graceMs = this.opts.stopGraceMs): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    const wasStarting = this._state === "starting" && !this.handle;
    const wasDown = this._state !== "running" && this._state !== "starting";
    this._state = "stopped";
    // A start in flight: it sees "stopped" once the launcher answers, and stops that agent itself.
    if (wasStarting) return void (await this.starting?.catch(() => {}));
    if (!this.handle || wasDown) return;
    const exit = await this.handle.stop(graceMs);
    this.emit({ type: "stopped", exit });
  }

  private adopt(handle: AgentHandle): void {
    this.handle = handle;
    this._state = "running";
    this.startedAt = Date.now();
    void handle.exited.then((exit) => {
      if (this.handle !== handle || this._state === "stopped") return;
      if (Date.now() - this.startedAt >= this.opts.healthyAfterMs) this.attempt = 0;
      this.attempt += 1;
      const delay = this.nextDelay();
      this._state = delay === null ? "failed" : "restarting";
      this.emit({ type: "crashed", exit, restartInMs: delay, attempt: this.attempt });
      this.schedule(delay);
    });
  }

  /** The wait before the next try, or null once maxAttempts consecutive tries have failed. */
  private nextDelay(): number | null {
    if (this.attempt > this.opts.maxAttempts) return null;
    return Math.min(this.opts.maxDelayMs, this.opts.initialDelayMs * 2 ** (this.attempt - 1));
  }

  private schedule(delay: number | null): void {
    if (delay === null) {
      this._state = "failed";
      this.emit({ type: "gave-up", attempts: this.attempt - 1 });
      return;
    }
    this._state = "restarting";
    this.timer = setTimeout(() => void this.restart(), delay);
  }

  private async restart(): Promise<void> {
    if (this._state !== "restarting") return;
    try {
      const handle = await this.launcher.start(this.spec);
      if (this._state !== "restarting") {
        await handle.stop(this.opts.stopGraceMs); // stopped while starting
        return;
      }
      this.adopt(handle);
      this.emit({ type: "restarted", url: handle.url, pid: handle.pid, socketPath: handle.socketPath, attempt: this.attempt, placement: handle.placement });
    } catch (err) {
      if (this._state !== "restarting") return;
      this.attempt += 1;
      const delay = this.nextDelay();
      this.emit({ type: "restart-failed", message: (err as Error).message, attempt: this.attempt, restartInMs: delay });
      this.schedule(delay);
    }
  }

  private emit(event: SupervisorEvent): void {
    try {
      this.opts.onEvent?.(event);
    } catch {
      // A failing listener must not take the supervisor down.
    }
  }
}
