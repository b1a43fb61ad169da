import type { ChildProcess } from "node:child_process";
import type { Timer } from "../../src/clock.js";
import type { LiveOutput } from "./live-output.js";
import type { StdinPipe } from "./stdin.js";
import type { ProcessRow, ProcessStatus } from "./process-store.js";
import { processStartTime } from "./os.js";
import type { ProcessRecord, StartProcessRequest } from "./types.js";

/**
 * What the supervisor (supervisor.ts) keeps of each run it watches, in memory, and the timings it keeps them by:
 * the adopted-process poll, the pause before a restart, how long a stalled stdin waits, what an OOM kill reads as;
 * and the pure parts of a record's life: a new run's row, whether a failed run restarts.
 */

/** In-memory state of a process this agent is watching. */
export interface Running {
  row: ProcessRow;
  child?: ChildProcess;
  stdin?: StdinPipe;
  /** The client closed stdin: a restarted run gets EOF at once too. */
  stdinClosed?: boolean;
  /** How to run it again (restartOnFailure); absent for a process adopted after an agent restart. */
  spec?: { command: string; cwd: string; workingDir: string; env?: Record<string, string> };
  output: LiveOutput;
  /** Set by stop, kill or the kill timer: what the exit means. */
  endReason?: { status: ProcessStatus; error: string };
  /** Stop's SIGKILL after the grace period. */
  timers: Timer[];
  killTimer?: Timer;
  /** Pending respawn after a failed run. */
  restart?: Timer;
  /** From a failed run's end to the next run's start (the pause and the respawn itself). */
  betweenRuns?: boolean;
  /** #finish has begun: once only. */
  finishing?: boolean;
  /** Adopted after a restart: polled, since it is not our child. */
  poll?: NodeJS.Timeout;
  waiters: { resolve(r: ProcessRecord): void; reject(e: Error): void }[];
  /** The sandbox's OOM-kill count when the current run started: a SIGKILL with a higher count since is an OOM kill. */
  oomKillsAtStart?: number;
}

export const ADOPTED_POLL_MS = 500;
/** Polls an adopted process may be gone without an exit record before its exit is taken as unknown. */
export const EXIT_RECORD_WAIT_POLLS = 3;
/** What the platform reports for a process the kernel killed at the sandbox's memory limit. */
export const OOM_KILLED = { status: "failed" as ProcessStatus, error: "killed by the OOM killer: the sandbox ran out of memory (spec.runtime.memory)" };
export const RESTART_DELAY_MS = 1_000; // reference: 1 s between a failure and the restart
export const STDIN_STALL_MS = 30_000;

/** The agent's environment minus its own API token: a command in the sandbox should not learn it for free. */
export function inheritedEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { SANDBOX_AGENT_TOKEN: _token, ...rest } = env;
  return rest;
}

/** A new run's record as it is stored: running, never restarted, nothing dropped yet. */
export function newProcessRow(
  id: string,
  run: { pid: number; sandboxPid: number },
  name: string,
  input: StartProcessRequest,
  workingDir: string,
  stdin: boolean,
  startedAt: number,
): ProcessRow {
  return {
    id,
    pid: run.sandboxPid,
    runPid: run.pid,
    name,
    command: input.command,
    status: "running",
    exitCode: null,
    error: null,
    startedAt,
    completedAt: null,
    workingDir,
    keepAlive: input.keepAlive ?? false,
    timeout: input.timeout ?? 0,
    killAfter: input.killAfter ?? 0,
    restartOnFailure: input.restartOnFailure ?? false,
    maxRestarts: input.maxRestarts ?? 0,
    restartCount: 0,
    stdin,
    procStart: processStartTime(run.pid),
    stdoutDropped: 0,
    stderrDropped: 0,
  };
}

/** Whether a failed run of this record is run again (restartOnFailure, within maxRestarts; negative: no limit). */
export function mayRestart(row: ProcessRow): boolean {
  return row.restartOnFailure && (row.maxRestarts < 0 || row.restartCount < row.maxRestarts);
}
