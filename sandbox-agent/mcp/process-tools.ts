import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import { execute, KEEP_ALIVE_DEFAULT_TIMEOUT, KEEP_ALIVE_DISABLED } from "../process/execute.js";
import type { ProcessRecord } from "../process/manager.js";
import { INLINE_OUTPUT_BYTES, toProcessResponse } from "../process/response.js";
import { ProcessResponseSchema, toolResult, type ToolContext } from "./context.js";

/** Reference MCP defaults: a 30 s wait, and at most 58 s in one call (then the client polls processGet). */
const MCP_DEFAULT_TIMEOUT = 30;
const MCP_MAX_WAIT = 58;

const Identifier = z.object({ identifier: z.string().describe("Process name or PID") }).strict();

/** Prefixes a failure the way the reference's process tools word it. */
async function prefixed<T>(prefix: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw new Error(`${prefix}: ${(err as Error).message}`);
  }
}

/** The reference's process tools (§9.11), over the same process table as /process. */
export function registerProcessTools(server: McpServer, ctx: ToolContext): void {
  const pm = ctx.processes;

  server.registerTool(
    "processesList",
    {
      description: "List the processes started in this sandbox, running and finished.",
      inputSchema: z.object({}).strict(),
      outputSchema: z.object({ processes: z.array(ProcessResponseSchema) }),
    },
    async () => toolResult({ processes: (await pm.describeAll(INLINE_OUTPUT_BYTES)).map(toProcessResponse) }),
  );

  server.registerTool(
    "processExecute",
    {
      description:
        "Run a shell command. With waitForCompletion, waits for its end (at most 58 s per call; then poll processGet). With waitForPorts, waits until those ports are served.",
      inputSchema: z
        .object({
          command: z.string().min(1).describe("Shell command"),
          name: z.string().optional().describe("Name to find the process by"),
          workingDir: z.string().optional().describe("Working directory (default /)"),
          env: z.record(z.string(), z.string()).optional().describe("Extra environment variables"),
          waitForCompletion: z.boolean().optional().describe("Wait for the process to end (default false)"),
          timeout: z.number().int().optional().describe("Seconds to wait (default 30; 600 with keepAlive); the process is killed then only with keepAlive"),
          waitForPorts: z.array(z.number().int().min(1).max(65535)).optional().describe("Ports to wait for"),
          restartOnFailure: z.boolean().optional().describe("Restart when it fails (default false)"),
          maxRestarts: z.number().int().optional().describe("Restarts allowed, negative = unlimited (default 0)"),
          keepAlive: z.boolean().optional().describe("Keep the sandbox awake while it runs; killed after the timeout"),
        })
        .strict(),
      outputSchema: z.object({
        pid: z.string(),
        name: z.string(),
        status: z.string(),
        exitCode: z.number(),
        logs: z.string().optional(),
        message: z.string().optional(),
        pollRequired: z.boolean().optional(),
      }),
    },
    async (input) => {
      if (input.keepAlive && ctx.keepAliveDisabled) throw errors.badRequest(KEEP_ALIVE_DISABLED);
      const timeout = input.timeout !== undefined && input.timeout >= 0 ? input.timeout : input.keepAlive ? KEEP_ALIVE_DEFAULT_TIMEOUT : MCP_DEFAULT_TIMEOUT;
      const request = {
        command: input.command,
        name: input.name,
        workingDir: input.workingDir ?? "/",
        env: input.env,
        keepAlive: input.keepAlive,
        timeout,
        killAfter: input.keepAlive ? timeout : 0,
        restartOnFailure: input.restartOnFailure,
        maxRestarts: input.maxRestarts,
      };
      const capped = input.waitForCompletion && (timeout === 0 || timeout > MCP_MAX_WAIT);
      let record;
      let started: ProcessRecord | undefined;
      try {
        record = await execute(pm, ctx.clock, request, {
          waitForCompletion: input.waitForCompletion,
          waitForPorts: input.waitForPorts,
          timeout: capped ? MCP_MAX_WAIT : timeout,
          onStarted: (r) => {
            started = r;
          },
        });
      } catch (err) {
        if (!(capped && err instanceof ApiError && err.status === 422 && /timed out after/.test(err.message) && started)) throw err;
        return toolResult({
          pid: started.pid,
          name: started.name,
          status: started.status,
          exitCode: -1,
          pollRequired: true,
          message: `The process is still running after ${MCP_MAX_WAIT} seconds. Poll processGet with identifier '${started.name}' until its status is not running.`,
        });
      }
      const out = toProcessResponse(await pm.describe(record.pid, pm.logMaxBytes));
      return toolResult({
        pid: out.pid,
        name: out.name,
        status: out.status,
        exitCode: out.exitCode,
        ...(input.waitForCompletion ? { logs: out.logs ?? "" } : {}),
      });
    },
  );

  server.registerTool(
    "processGet",
    {
      description: "Get a process by name or PID, with the tail of its output.",
      inputSchema: Identifier,
      outputSchema: ProcessResponseSchema,
    },
    async ({ identifier }) => prefixed("failed to get process", async () => toolResult(toProcessResponse(await pm.describe(identifier, INLINE_OUTPUT_BYTES)))),
  );

  server.registerTool(
    "processGetLogs",
    {
      description: "Get the output of a process (stdout then stderr).",
      inputSchema: Identifier,
      outputSchema: z.object({ logs: z.string() }),
    },
    async ({ identifier }) => prefixed("failed to get process logs", async () => toolResult({ logs: (await pm.logs(identifier)).logs })),
  );

  server.registerTool(
    "processStop",
    {
      description: "Stop a process gracefully (SIGTERM to its process group, SIGKILL after a grace period).",
      inputSchema: Identifier,
      outputSchema: z.object({ status: z.string() }),
    },
    async ({ identifier }) =>
      prefixed("failed to stop process", async () => {
        await pm.stop(identifier);
        return toolResult({ status: "stopped" });
      }),
  );

  server.registerTool(
    "processKill",
    {
      description: "Kill a process and its process group (SIGKILL).",
      inputSchema: Identifier,
      outputSchema: z.object({ status: z.string() }),
    },
    async ({ identifier }) =>
      prefixed("failed to kill process", async () => {
        await pm.kill(identifier);
        return toolResult({ status: "killed" });
      }),
  );
}
