import { closeSync, readFileSync, rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { z } from "zod";
import { isLoopbackHost } from "../src/auth.js";
import { parseDuration, parseSize } from "../src/units.js";
import { parseCommandTemplate } from "./drives/command-template.js";
import { AGENT_OPTIONS, ConfigError, FLAG_OF } from "./config-options.js";
import { CONFINEMENT_SETTINGS } from "./paths/confinement.js";

/** The command line's tables (config-options.ts), importable from here as before. */
export { AGENT_OPTIONS, AGENT_USAGE } from "./config-options.js";

/**
 * The agent's configuration: command-line options, then environment
 * fallbacks, validated into one frozen object. Nothing else reads argv or env.
 */

// Numbers are taken as already converted (milliseconds, bytes): tests and programmatic callers pass them.
const duration = z.union([z.number().int().positive(), z.string()]).transform((v, ctx) => {
  try {
    return typeof v === "number" ? v : parseDuration(v);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
    return z.NEVER;
  }
});
const size = z.union([z.number().int().positive(), z.string()]).transform((v, ctx) => {
  try {
    return typeof v === "number" ? v : parseSize(v);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
    return z.NEVER;
  }
});

const commandTemplate = z.string().transform((v, ctx) => {
  try {
    return parseCommandTemplate(v);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
    return z.NEVER;
  }
});

export const AgentConfigSchema = z.object({
  host: z.string().min(1).default("127.0.0.1"),
  port: z.coerce.number().int().min(0).max(65535).default(8080),
  // Safe defaults for a person trying the agent alone: everything under ./.sandbox, never the host's `/`.
  // Launchers pass --root and --data-dir explicitly (inside an isolated sandbox the root is `/`).
  root: z
    .string()
    .min(1)
    .default("./.sandbox/root")
    .transform((p) => resolve(p)),
  dataDir: z
    .string()
    .min(1)
    .default("./.sandbox/data")
    .transform((p) => resolve(p)),
  token: z.string().min(1).optional(),
  noAuth: z.boolean().default(false),
  uploadExpiryMs: duration.default(parseDuration("24h")),
  maxOpenUploads: z.coerce.number().int().min(1).default(100),
  maxPartSize: size.default(5 * 2 ** 30),
  sandboxName: z.string().min(1).default("local"),
  processLogMaxBytes: size.default(4 * 2 ** 20),
  processStopGraceMs: duration.default(parseDuration("5s")),
  processHistory: z.coerce.number().int().min(1).default(1000),
  driveBackend: z.enum(["auto", "bind", "command", "symlink"]).default("auto"),
  /** Default: <dataDir>/drives (resolved in openAgent). */
  drivesDir: z
    .string()
    .min(1)
    .transform((p) => resolve(p))
    .optional(),
  /** bind/symlink: mount only drives whose directory exists (a control plane provisions them), never create one. */
  drivesExistingOnly: z.boolean().default(false),
  driveMountCommand: commandTemplate.optional(),
  driveUnmountCommand: commandTemplate.optional(),
  driveMountTimeoutMs: duration.default(parseDuration("30s")),
  /** How the agent runs mount(8) / umount(8) (argv prefix); default from PATH. A launcher passes its own so no image needs them. */
  mountProgram: commandTemplate.optional(),
  umountProgram: commandTemplate.optional(),
  /** BL_DISABLE_KEEPALIVE (the sandbox's plan has no keepAlive): POST /process with keepAlive answers 400, as the reference. */
  keepAliveDisabled: z.boolean().default(false),
  /** DISABLE_TERMINAL=true|1 (the reference's switch): /terminal and /terminal/ws answer 404. */
  terminalDisabled: z.boolean().default(false),
  /** The platform's metadata document POST /environment/reload reads (reference: BL_METADATA_PATH, /bl/metadata). */
  metadataPath: z
    .string()
    .min(1)
    .default("/bl/metadata")
    .transform((p) => resolve(p)),
  /** Default: from the open-files limit (src/serve.ts defaultMaxConnections). */
  maxConnections: z.coerce.number().int().min(1).optional(),
  /** AES-256-GCM key for schedule env values at rest. Default: <dataDir>/secrets.key (refused to the API like the rest of the data dir). */
  secretsKeyFile: z
    .string()
    .min(1)
    .transform((p) => resolve(p))
    .optional(),
  /** Listen on this Unix socket instead of host:port (the isolating launcher binds its directory out of the sandbox). */
  socket: z
    .string()
    .min(1)
    .transform((p) => resolve(p))
    .optional(),
  /** Also listen on 127.0.0.1:<port> without a token, for the sandbox's own processes (http/in-sandbox-port.ts); needs a network namespace of its own. */
  inSandboxPort: z.coerce.number().int().min(1).max(65535).optional(),
  /** Argv every command the agent runs (processes, schedules) starts through, e.g. a capability drop. */
  processWrapper: commandTemplate.optional(),
  /**
   * The sandbox path commands start in when they name none: the reference daemon's own working
   * directory, which on the platform is the image's WORKDIR. Created at start when missing (as a
   * container runtime creates the image's WorkingDir).
   */
  workingDir: z
    .string()
    .min(1)
    .refine((p) => p.startsWith("/"), "must be an absolute sandbox path")
    .default("/"),
  /** A cgroup file with an `oom_kill N` line (memory.events, memory.oom_control): SIGKILLs it counts are reported as OOM kills. */
  memoryEvents: z.string().min(1).optional(),
  /** Hand connections to in-sandbox ports to the launcher over the IPC channel it started the agent with (ports/handoff.ts). */
  portHandoff: z.boolean().default(false),
  /** `<port>=<host>:<port>`: relay connections to 127.0.0.1 and ::1 on the first port inside the sandbox to the simulator's egress at host:port (ports/egress-relay.ts). */
  egressRelay: z
    .string()
    .regex(/^\d{1,5}=[0-9a-fA-F.:]+:\d{1,5}$/, "must be <port>=<address>:<port>")
    .transform((v) => {
      const [port, target] = v.split("=") as [string, string];
      const at = target.lastIndexOf(":");
      return { port: Number(port), host: target.slice(0, at), targetPort: Number(target.slice(at + 1)) };
    })
    .refine((r) => [r.port, r.targetPort].every((p) => p >= 1 && p <= 65_535), "ports must be 1-65535")
    .optional(),
  /** Accept connections to 127.0.0.1 and ::1 on this port inside the sandbox and hand each to the launcher over a tunnel it opened (GET /egress-tunnel, ports/egress-tunnel.ts). */
  egressTunnel: z.coerce.number().int().min(1).max(65535).optional(),
  /** How API paths are confined under --root (paths/confinement.ts): openat2 where it can run, else the descriptor walk. */
  confinement: z.enum(CONFINEMENT_SETTINGS).default("auto"),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  logFormat: z.enum(["auto", "pretty", "json"]).default("auto"),
});

export type AgentConfig = Readonly<z.infer<typeof AgentConfigSchema>>;

export { ConfigError } from "./config-options.js";

export function parseAgentConfig(argv: string[], env: NodeJS.ProcessEnv): AgentConfig | "help" {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: AGENT_OPTIONS, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  if (values.help) return "help";
  const raw = {
    host: values.host ?? env.SANDBOX_AGENT_HOST,
    port: values.port ?? env.PORT,
    root: values.root ?? env.SANDBOX_AGENT_ROOT,
    dataDir: values["data-dir"] ?? env.SANDBOX_AGENT_DATA_DIR,
    token:
      values.token ??
      readToken(
        (values["token-file"] as string | undefined) ?? (env.SANDBOX_AGENT_TOKEN_FILE || undefined),
        values["token-fd"] as string | undefined,
        values["token-file-remove"] === true,
      ) ??
      (env.SANDBOX_AGENT_TOKEN || undefined),
    noAuth: values["no-auth"] ?? false,
    uploadExpiryMs: values["upload-expiry"],
    maxOpenUploads: values["max-open-uploads"],
    maxPartSize: values["max-part-size"],
    sandboxName: values["sandbox-name"] ?? env.SANDBOX_NAME,
    processLogMaxBytes: values["process-log-max"],
    processStopGraceMs: values["process-stop-grace"],
    processHistory: values["process-history"],
    driveBackend: values["drive-backend"],
    drivesDir: values["drives-dir"],
    drivesExistingOnly: values["drives-existing-only"] ?? false,
    driveMountCommand: values["drive-mount-command"],
    driveUnmountCommand: values["drive-unmount-command"],
    driveMountTimeoutMs: values["drive-mount-timeout"],
    mountProgram: values["mount-program"],
    umountProgram: values["umount-program"],
    metadataPath: values["metadata-path"] ?? env.BL_METADATA_PATH,
    keepAliveDisabled: /^(1|true|yes|on)$/i.test(env.BL_DISABLE_KEEPALIVE ?? ""),
    terminalDisabled: /^(1|true)$/i.test(env.DISABLE_TERMINAL ?? ""),
    maxConnections: values["max-connections"],
    secretsKeyFile: values["secrets-key-file"],
    socket: values.socket ?? (env.SANDBOX_AGENT_SOCKET || undefined),
    inSandboxPort: values["in-sandbox-port"],
    processWrapper: values["process-wrapper"],
    workingDir: values["working-dir"],
    memoryEvents: values["memory-events"],
    portHandoff: values["port-handoff"] ?? false,
    egressRelay: values["egress-relay"],
    egressTunnel: values["egress-tunnel"],
    confinement: values.confinement ?? (env.SANDBOX_AGENT_CONFINEMENT || undefined),
    logLevel: values["log-level"] ?? env.LOG_LEVEL,
    logFormat: values["log-format"] ?? (env.LOG_FORMAT || undefined),
  };
  const parsed = AgentConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`--${FLAG_OF[String(issue.path[0])] ?? String(issue.path[0])}: ${issue.message}`);
  }
  const config = parsed.data;
  if (config.driveBackend === "command" && !config.driveMountCommand) {
    throw new ConfigError("--drive-backend command needs --drive-mount-command");
  }
  if (!config.token && !config.noAuth && !config.socket && !isLoopbackHost(config.host)) {
    throw new ConfigError(
      `refusing to listen on ${config.host} without a token: pass --token (or SANDBOX_AGENT_TOKEN), or --no-auth to accept unauthenticated access`,
    );
  }
  return Object.freeze(config);
}

/**
 * The token from --token-file or --token-fd: its first line. A token in the
 * environment or argv is readable by every process of the sandbox through
 * /proc/<agent pid>/environ or cmdline; a pipe read and closed
 * at start-up, or a file only the agent may read, is not.
 */
function readToken(file: string | undefined, fd: string | undefined, removeFile: boolean): string | undefined {
  if (file !== undefined && fd !== undefined) throw new ConfigError("--token-file and --token-fd: give one of them");
  let text: string;
  try {
    if (file !== undefined) {
      text = readFileSync(file, "utf8");
      if (removeFile) rmSync(file, { force: true });
    } else if (fd !== undefined) {
      if (!/^\d+$/.test(fd) || Number(fd) < 3) throw new ConfigError(`--token-fd: "${fd}" is not a descriptor number of 3 or more`);
      text = readFileSync(Number(fd), "utf8");
      closeSync(Number(fd));
    } else return undefined;
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    if (file !== undefined && (e as NodeJS.ErrnoException).code === "ENOENT") {
      throw new ConfigError(`--token-file ${file}: no such file (mount the secret there, or unset SANDBOX_AGENT_TOKEN_FILE)`);
    }
    throw new ConfigError(`${file !== undefined ? "--token-file" : "--token-fd"}: cannot read the token: ${(e as Error).message}`);
  }
  const token = text.split("\n")[0]!.trim();
  if (!token) throw new ConfigError(`${file !== undefined ? "--token-file" : "--token-fd"}: the token is empty`);
  return token;
}
