import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { agentFetch, type AgentEndpoint } from "../../../simulator/launcher/endpoint.js";
import type { LaunchSpec } from "../../../simulator/launcher/index.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/** Removed after the test file (test/helpers/setup.ts), if the test did not remove it. */
export function tempBase(prefix = "launcher-"): string {
  return trackedTempDir(prefix);
}

export function specFor(base: string, sandbox: string, extra: Partial<LaunchSpec> = {}): LaunchSpec {
  return {
    workspace: "ws",
    sandbox,
    rootDir: join(base, sandbox, "root"),
    dataDir: join(base, sandbox, "data"),
    token: `token-${sandbox}-0123456789`,
    logLevel: "warn",
    ...extra,
  };
}

/** Runs a shell command through the agent's /process API (TCP or Unix socket) and returns its stdout. */
export async function exec(endpoint: string | AgentEndpoint, token: string, command: string): Promise<{ stdout: string; exitCode: number }> {
  const res = await agentFetch(typeof endpoint === "string" ? { url: endpoint } : endpoint, {
    method: "POST",
    path: "/process",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ command, waitForCompletion: true }),
  });
  const body = JSON.parse(res.text) as { stdout?: string; exitCode?: number; error?: string };
  if (res.status !== 200) throw new Error(`exec ${command}: ${res.status} ${body.error}`);
  return { stdout: body.stdout ?? "", exitCode: body.exitCode ?? -1 };
}

/** Polls until `check` is true (at most `ms`); for events a real process produces asynchronously. */
export async function eventually(check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(20);
  }
}

/** Whether a process with this pid exists (signal 0). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
