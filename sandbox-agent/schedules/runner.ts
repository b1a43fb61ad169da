import type { ProcessOutput, ProcessRecord, StartProcessRequest } from "../process/types.js";

/** The part of a process record the scheduler reads to learn how a run ended. */
export type RunnerProcess = Pick<ProcessRecord, "pid" | "name" | "status" | "exitCode" | "error">;

/**
 * What the scheduler needs from the process manager (sandbox-agent/process/),
 * and nothing more: start a command, learn how it ended, read its output,
 * kill it. The real ProcessManager satisfies this structurally; tests give a fake.
 */
export interface ScheduleRunner {
  /** Runs pass `killAfter: input.timeout`: the runner kills the process group when it expires (status `killed`). */
  start(req: StartProcessRequest): Promise<RunnerProcess>;
  waitForExit(pidOrName: string): Promise<RunnerProcess>;
  logs(pidOrName: string): Promise<ProcessOutput>;
  kill(pidOrName: string): Promise<void>;
}

export interface ExecutionOutcome {
  status: "succeeded" | "failed";
  exitCode: number | null;
  error: string;
}

/** How an execution ended, from the process record: only exit code 0 succeeds. */
export function outcomeOf(process: RunnerProcess, timeoutSeconds: number): ExecutionOutcome {
  const exitCode = process.exitCode;
  if (process.status === "completed" && exitCode === 0) return { status: "succeeded", exitCode, error: "" };
  if (process.status === "killed") {
    const error = process.error || (timeoutSeconds > 0 ? `timeout: killed after ${timeoutSeconds}s` : "killed");
    return { status: "failed", exitCode, error };
  }
  if (process.status === "stopped") return { status: "failed", exitCode, error: process.error || "stopped" };
  const error = process.error || (exitCode !== null ? `non-zero exit code ${exitCode}` : "failed");
  return { status: "failed", exitCode, error };
}

/** The tail of a process's output kept on its execution record. */
export const OUTPUT_TAIL_BYTES = 4096;

export function tail(text: string, maxBytes = OUTPUT_TAIL_BYTES): string {
  const buf = Buffer.from(text, "utf8");
  if (buf.length <= maxBytes) return text;
  // Drop a partial UTF-8 sequence at the cut.
  let start = buf.length - maxBytes;
  while (start < buf.length && (buf[start]! & 0xc0) === 0x80) start++;
  return buf.subarray(start).toString("utf8");
}
