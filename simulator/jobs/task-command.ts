import { agentFetch, type AgentEndpoint } from "../launcher/index.js";
import { tail } from "./run-state.js";

/** The name of a task's command in its agent: a cancel kills it by this name. */
export const TASK_PROCESS = "job-task";

/** How one attempt of a task ended. */
export interface AttemptResult {
  ok: boolean;
  exitCode?: number;
  timedOut?: boolean;
  error?: string;
  stdout?: string;
  stderr?: string;
}

/** Runs the job's command in a task's agent (its /process API, waiting for completion) and reads how it ended. */
export async function runTaskCommand(handle: AgentEndpoint, token: string, command: string, timeout: number | undefined): Promise<AttemptResult> {
  // The agent's timeout bounds the wait (422 when it expires, as the reference daemon); keepAlive with a
  // timeout is what kills the process group. A task past the job's timeout is killed either way.
  const { status, body } = await postJson(handle, "/process", token, {
    command,
    name: TASK_PROCESS,
    waitForCompletion: true,
    timeout,
    keepAlive: timeout !== undefined,
  });
  if (status === 422 && timeout !== undefined && /timed out/.test(String(body.error ?? ""))) {
    await postJson(handle, `/process/${TASK_PROCESS}/kill`, token, {}).catch(() => undefined);
    return { ok: false, exitCode: -1, timedOut: true, error: `timed out after ${timeout} s: killed` };
  }
  if (status !== 200) return { ok: false, error: `the task's agent refused the command (${status}): ${String(body.error ?? body.message ?? "")}` };
  const exitCode = typeof body.exitCode === "number" ? body.exitCode : -1;
  const timedOut = body.status === "killed" && /timed out|timeout/.test(String(body.error ?? ""));
  const ok = body.status === "completed" && exitCode === 0;
  const error = ok
    ? undefined
    : timedOut
      ? `timed out after ${timeout} s: killed`
      : body.status === "killed" || body.status === "stopped"
        ? String(body.error ?? body.status)
        : `exited with code ${exitCode}`;
  return { ok, exitCode, timedOut, error, stdout: tail(body.stdout as string), stderr: tail(body.stderr as string) };
}

/** Kills the task's command (the agent kills its process group). */
export function killTaskCommand(handle: AgentEndpoint, token: string): Promise<unknown> {
  return postJson(handle, `/process/${TASK_PROCESS}/kill`, token, {});
}

/**
 * POST with a JSON body through node:http, without a response timeout: a
 * task's command may run for hours (fetch would give up after 5 minutes).
 */
/** A JSON POST to a task's agent, through its endpoint (a TCP URL, or the Unix socket of an isolated one). */
async function postJson(agent: AgentEndpoint, path: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const reply = await agentFetch(agent, {
    method: "POST",
    path,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: reply.status, body: JSON.parse(reply.text || "{}") as Record<string, unknown> };
}
