import { z } from "zod";
import type { Clock } from "../../src/clock.js";
import type { OwnerNames } from "../filesystem/owners.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import type { ProcessManager } from "../process/manager.js";

/** What the MCP tools call: the agent's own services, in-process, confined under --root like the HTTP routes. */
export interface ToolContext {
  paths: SandboxPaths;
  processes: ProcessManager;
  clock: Clock;
  owners: OwnerNames;
  /** BL_DISABLE_KEEPALIVE: processExecute with keepAlive is refused. */
  keepAliveDisabled?: boolean;
}

/**
 * The working directory relative tool paths start from: the sandbox root
 * (the reference uses $WORKDIR; here every path is a sandbox path).
 */
export const WORKING_DIRECTORY = "/";

/** A tool's success: the output object as structuredContent and, for older clients, as JSON text (reference §9.11). */
export function toolResult<T extends object>(out: T) {
  return { content: [{ type: "text" as const, text: JSON.stringify(out) }], structuredContent: out as Record<string, unknown> };
}

export const FileSchema = z.object({
  path: z.string(),
  name: z.string(),
  permissions: z.string(),
  size: z.number(),
  lastModified: z.string(),
  owner: z.string(),
  group: z.string(),
});

export const DirectorySchema = z.object({
  path: z.string(),
  name: z.string(),
  files: z.array(FileSchema),
  subdirectories: z.array(z.object({ path: z.string(), name: z.string() })),
});

/** The wire ProcessResponse (process/response.ts). */
export const ProcessResponseSchema = z.object({
  pid: z.string(),
  name: z.string(),
  command: z.string(),
  status: z.enum(["running", "completed", "failed", "stopped", "killed"]),
  exitCode: z.number(),
  error: z.string().nullable(),
  startedAt: z.string(),
  completedAt: z.string().nullable(),
  workingDir: z.string(),
  keepAlive: z.boolean(),
  timeout: z.number(),
  logs: z.string().nullable(),
  stdout: z.string().nullable(),
  stderr: z.string().nullable(),
  restartOnFailure: z.boolean(),
  maxRestarts: z.number(),
  restartCount: z.number(),
  stdin: z.boolean(),
});
