import { ApiError, ERROR_CODES, errors, type ErrorCode } from "../../src/errors.js";
import { agentFetch, type AgentReply } from "../launcher/endpoint.js";
import type { SandboxAgents } from "./registry.js";

/**
 * The control plane calling a sandbox's agent API itself (schedules, drive
 * checks), with the sandbox's own token. Whatever keeps the agent from
 * answering is a 503 naming the sandbox; the agent's 4xx come back as the
 * same status with its message; its 5xx as a 502.
 */

export interface AgentCall {
  method?: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
}

const CODE_OF_STATUS = new Map<number, ErrorCode>(
  Object.entries(ERROR_CODES)
    .filter(([code]) => code !== "invalid_api_version")
    .map(([code, status]) => [status, code as ErrorCode]),
);

function unavailable(workspace: string, sandbox: string, why: string): ApiError {
  return errors.serviceUnavailable(`sandbox "${sandbox}" in workspace "${workspace}" is unavailable: ${why}`);
}

export async function callAgent<T>(agents: SandboxAgents, workspace: string, sandbox: string, call: AgentCall): Promise<T> {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(call.query ?? {})) if (v !== undefined) search.set(k, String(v));
  const qs = search.toString();
  const path = qs ? `${call.path}?${qs}` : call.path;
  let upstream;
  try {
    upstream = await agents.upstream({ workspace, sandbox, path });
  } catch (err) {
    // The sandbox exists on the control plane (callers check): no running agent means it is down.
    if (err instanceof ApiError && err.status === 404) throw unavailable(workspace, sandbox, "its agent is not running");
    throw err;
  }
  let res: AgentReply;
  try {
    res = await agentFetch(upstream, {
      method: call.method ?? "GET",
      path,
      headers: { authorization: `Bearer ${upstream.token}`, ...(call.body === undefined ? {} : { "content-type": "application/json" }) },
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      timeoutMs: 30_000,
    });
  } catch (err) {
    const cause = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw unavailable(workspace, sandbox, `its agent is not answering (${cause})`);
  }
  const text = res.text;
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    throw new ApiError("internal", `sandbox "${sandbox}": its agent answered ${res.status} with a body that is not JSON`, { status: 502 });
  }
  if (res.status >= 200 && res.status < 300) return body as T;
  const message = typeof (body as { error?: unknown })?.error === "string" ? (body as { error: string }).error : `HTTP ${res.status}`;
  if (res.status >= 500) throw new ApiError("internal", `sandbox "${sandbox}": its agent failed: ${message}`, { status: 502 });
  throw new ApiError(CODE_OF_STATUS.get(res.status) ?? "bad_request", message, { status: res.status });
}
