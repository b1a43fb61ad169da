import type { Clock, Timer } from "../../src/clock.js";
import { errors } from "../../src/errors.js";
import { servedPorts } from "../ports/sockets.js";
import type { ProcessManager, ProcessRecord, StartProcessRequest } from "./manager.js";

/** SDK default (ProcessRequest.timeout doc): keepAlive without a timeout means 600 s. */
export const KEEP_ALIVE_DEFAULT_TIMEOUT = 600;
const PORT_POLL_MS = 200;

/**
 * Reference §4.2: the effective timeout is `timeout` when given, else 0 (none);
 * with keepAlive an absent or negative one means 600 s. Only keepAlive turns it
 * into a kill timer; otherwise it bounds the caller's waits and nothing else.
 */
export function timeoutsOf(timeout: number | null | undefined, keepAlive: boolean | undefined): { timeout: number; killAfter: number } {
  const given = typeof timeout === "number" && timeout >= 0 ? timeout : undefined;
  const effective = given ?? (keepAlive ? KEEP_ALIVE_DEFAULT_TIMEOUT : 0);
  return { timeout: effective, killAfter: keepAlive ? effective : 0 };
}

/** Reference §4.2 step 2, word for word. */
export const KEEP_ALIVE_DISABLED = "keepAlive is not available for this sandbox: it is not included in your current plan";

export interface Waits {
  waitForCompletion?: boolean;
  waitForPorts?: readonly number[];
  /** Seconds both waits share (0 = unbounded); on expiry a 422 and the process keeps running. */
  timeout: number;
  /** The caller went away: stop waiting. */
  signal?: AbortSignal;
  /** Told the record as soon as the process runs (a caller that times out still knows what it started). */
  onStarted?(record: ProcessRecord): void;
}

/**
 * Starts a command and waits as asked: first for every port of `waitForPorts`
 * to be served by the process's tree, then for its end. One timeout covers
 * both; when it expires the answer is 422 and the process keeps running.
 */
export async function execute(manager: ProcessManager, clock: Clock, request: StartProcessRequest, waits: Waits): Promise<ProcessRecord> {
  const started = await manager.start(request);
  waits.onStarted?.(started);
  const deadline = waits.timeout > 0 ? clock.now() + waits.timeout * 1000 : undefined;
  const signal = waits.signal ?? new AbortController().signal;
  if (waits.waitForPorts?.length) {
    const ports = [...new Set(waits.waitForPorts)];
    await bounded(clock, deadline, `process timed out waiting for ports after ${waits.timeout} seconds`, signal, (s) =>
      portsServed(manager, Number(started.pid), ports, s),
    );
  }
  if (waits.waitForCompletion) {
    return bounded(clock, deadline, `process timed out after ${waits.timeout} seconds`, signal, () => manager.waitForExit(started.pid));
  }
  return manager.get(started.pid) ?? started;
}

/** Runs `work` until `deadline` (epoch ms on the clock): past it, a 422 with `message`; the work is told to stop. */
async function bounded<T>(
  clock: Clock,
  deadline: number | undefined,
  message: string,
  outer: AbortSignal,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const stop = () => controller.abort();
  outer.addEventListener("abort", stop);
  let timer: Timer | undefined;
  try {
    const racers = [work(controller.signal)];
    if (deadline !== undefined) {
      racers.push(
        new Promise<never>((_, reject) => {
          timer = clock.setTimer(Math.max(0, deadline - clock.now()), () => reject(errors.unprocessable(message)));
        }),
      );
    }
    return await Promise.race(racers);
  } finally {
    timer?.cancel();
    outer.removeEventListener("abort", stop);
    controller.abort();
  }
}

/**
 * Polls the kernel's socket tables until each port has a routable listener in
 * the process's tree (its current run after a restart). Unlike the reference,
 * which waits on, a process that has ended for good (nothing left in its
 * process group either) ends the wait with a 422.
 */
async function portsServed(manager: ProcessManager, pid: number, ports: number[], signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    const run = manager.runOf(pid);
    if (!run?.alive) {
      const record = manager.get(String(pid));
      throw errors.unprocessable(
        `process ended (${record?.status ?? "unknown"}, exit code ${record?.exitCode ?? -1}) before listening on port${ports.length > 1 ? "s" : ""} ${ports.join(", ")}`,
      );
    }
    const served = await servedPorts(run.runPid, ports);
    if (ports.every((p) => served.has(p))) return;
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(() => {
        signal.removeEventListener("abort", wake);
        resolve();
      }, PORT_POLL_MS);
      signal.addEventListener("abort", wake, { once: true });
    });
  }
  throw errors.serviceUnavailable("the wait was abandoned");
}
