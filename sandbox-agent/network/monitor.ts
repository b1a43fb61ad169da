import type { Logger } from "../../src/logging.js";
import { portsOfTree } from "../ports/sockets.js";

const POLL_MS = 500; // reference: the port monitor polls every 500 ms
const CALLBACK_TIMEOUT_MS = 5_000;

interface Monitor {
  callbacks: Set<string>;
  /** Local ports of the previous poll: a port not in it is new. */
  previous: Set<number>;
  timer: NodeJS.Timeout;
  busy: boolean;
}

export interface PortMonitorOptions {
  /** The current run of a known process; not alive once it and its process group have ended (the monitor then stops). */
  runOf(pid: number): { runPid: number; alive: boolean } | undefined;
  logger: Logger;
  /** Delivery (tests may observe it); default: fetch POST with a JSON body. */
  deliver?(url: string, body: { pid: number; port: number }): Promise<void>;
}

/**
 * The port monitor of `POST /network/process/{pid}/monitor` (reference §9.9):
 * every 500 ms, each local port of the process tree that was not there at the
 * previous poll (so every port at the first one) is POSTed to every callback
 * as `{"pid", "port"}`, fire-and-forget. Callbacks accumulate per pid until
 * DELETE; unlike the reference, a monitor also ends with its process.
 */
export class PortMonitors {
  readonly #o: PortMonitorOptions;
  readonly #monitors = new Map<number, Monitor>();

  constructor(options: PortMonitorOptions) {
    this.#o = options;
  }

  start(pid: number, callback: string): void {
    const existing = this.#monitors.get(pid);
    if (existing) {
      existing.callbacks.add(callback);
      return;
    }
    const monitor: Monitor = {
      callbacks: new Set([callback]),
      previous: new Set(),
      busy: false,
      timer: setInterval(() => void this.#poll(pid, monitor), POLL_MS),
    };
    monitor.timer.unref();
    this.#monitors.set(pid, monitor);
    void this.#poll(pid, monitor);
  }

  /** Drops every callback of `pid`; true if there was a monitor. */
  stop(pid: number): boolean {
    const monitor = this.#monitors.get(pid);
    if (!monitor) return false;
    clearInterval(monitor.timer);
    this.#monitors.delete(pid);
    return true;
  }

  close(): void {
    for (const pid of [...this.#monitors.keys()]) this.stop(pid);
  }

  async #poll(pid: number, monitor: Monitor): Promise<void> {
    if (monitor.busy) return;
    const run = this.#o.runOf(pid);
    if (!run?.alive) {
      this.stop(pid);
      return;
    }
    monitor.busy = true;
    try {
      const now = new Set((await portsOfTree(run.runPid)).map((p) => p.localPort));
      if (this.#monitors.get(pid) !== monitor) return;
      for (const port of now) {
        if (monitor.previous.has(port)) continue;
        for (const url of monitor.callbacks) this.#send(url, { pid, port });
      }
      monitor.previous = now;
    } catch (err) {
      this.#o.logger.warn({ err, pid }, "port monitor poll failed");
    } finally {
      monitor.busy = false;
    }
  }

  #send(url: string, body: { pid: number; port: number }): void {
    const deliver = this.#o.deliver ?? postJson;
    deliver(url, body).catch((err: unknown) =>
      this.#o.logger.warn({ err: (err as Error).message, pid: body.pid, port: body.port }, "port monitor callback failed"),
    );
  }
}

async function postJson(url: string, body: unknown): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
  });
  await res.body?.cancel();
}
