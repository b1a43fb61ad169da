import { closeSync, readFileSync, rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { z } from "zod";
import { isLoopbackHost } from "../src/auth.js";
import { parseDuration, parseSize } from "../src/units.js";
import { parseCommandTemplate } from "./drives/command-template.js";

/**
 * The agent's configuration: command-line options, then environment
 * fallbacks, validated into one frozen object. Nothing else reads argv or env.
 */
export const AGENT_OPTIONS = {
  host: { type: "string" },
  port: { type: "string" },
  root: { type: "string" },
  "data-dir": { type: "string" },
  token: { type: "string" },
  "no-auth": { type: "boolean" },
  "upload-expiry": { type: "string" },
  "max-open-uploads": { type: "string" },
  "max-part-size": { type: "string" },
  "sandbox-name": { type: "string" },
  "process-log-max": { type: "string" },
  "process-stop-grace": { type: "string" },
  "process-history": { type: "string" },
  "drive-backend": { type: "string" },
  "drives-dir": { type: "string" },
  "drives-existing-only": { type: "boolean" },
  "drive-mount-command": { type: "string" },
  "drive-unmount-command": { type: "string" },
  "drive-mount-timeout": { type: "string" },
  "mount-program": { type: "string" },
  "umount-program": { type: "string" },
  "metadata-path": { type: "string" },
  "max-connections": { type: "string" },
  "token-file": { type: "string" },
  "token-fd": { type: "string" },
  "token-file-remove": { type: "boolean" },
  "secrets-key-file": { type: "string" },
  socket: { type: "string" },
  "in-sandbox-port": { type: "string" },
  "process-wrapper": { type: "string" },
  "working-dir": { type: "string" },
  "memory-events": { type: "string" },
  "port-handoff": { type: "boolean" },
  "egress-relay": { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

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
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  logFormat: z.enum(["auto", "pretty", "json"]).default("auto"),
});

export type AgentConfig = Readonly<z.infer<typeof AgentConfigSchema>>;

export const AGENT_USAGE = `Usage: sandbox-agent [options]

  --host <addr>              listen address (default 127.0.0.1; env SANDBOX_AGENT_HOST)
  --port <n>                 listen port, 0 picks a free one (default 8080; env PORT)
  --root <dir>               sandbox root every API path is confined under, created when missing
                             (default ./.sandbox/root; env SANDBOX_AGENT_ROOT)
  --data-dir <dir>           agent state: database, upload parts, logs (default ./.sandbox/data; env SANDBOX_AGENT_DATA_DIR)
  --token <secret>           require "Bearer <secret>" on every route but /health (env SANDBOX_AGENT_TOKEN)
  --no-auth                  allow listening on a non-loopback address without a token
  --upload-expiry <dur>      abandoned multipart uploads expire after this idle time (default 24h)
  --max-open-uploads <n>     cap on open multipart uploads, 429 beyond (default 100)
  --max-part-size <size>     largest accepted part, 413 beyond (default 5GiB)
  --sandbox-name <name>      this sandbox's name, recorded in schedules (default local; env SANDBOX_NAME)
  --process-log-max <size>   output kept per process stream, oldest dropped beyond (default 4MiB)
  --process-stop-grace <dur> DELETE /process/{id}: SIGTERM, then SIGKILL after this (default 5s)
  --process-history <n>      finished processes remembered, with their output (default 1000)
  --drive-backend <name>     auto|bind|command|symlink; auto = bind where the agent may mount, else symlink (default auto)
  --drives-dir <dir>         bind/symlink backends: drive N is <dir>/N (default <data-dir>/drives)
  --drives-existing-only     bind/symlink backends: mounting a drive whose <dir>/N does not exist fails (404) instead of creating it
  --drive-mount-command <argv>    command backend: mount template, JSON array or words; {driveName} {drivePath} {mountPath} {readOnly}
  --drive-unmount-command <argv>  command backend: unmount template (default umount {mountPath})
  --drive-mount-timeout <dur>     command backend: wait this long for a mount to be ready (default 30s)
  --mount-program <argv>     how to run mount(8), JSON array or words (default mount from PATH; launchers pass their own copy)
  --umount-program <argv>    how to run umount(8), JSON array or words (default umount from PATH)
  --metadata-path <file>     POST /environment/reload reads {generation, environment} here (default /bl/metadata; env BL_METADATA_PATH)
  --max-connections <n>      open connections admitted; at the cap the oldest idle ones are closed (default: from the open-files limit)
  --token-file <path>        read the token from this file, first line (a container secret; env SANDBOX_AGENT_TOKEN_FILE)
  --token-file-remove        delete the --token-file once read (a launcher's one-time hand-off)
  --token-fd <n>             read the token from this inherited file descriptor (a pipe the launcher writes and closes)
  --secrets-key-file <path>  AES-256-GCM key encrypting schedule env values at rest; created 0600 if missing (default <data-dir>/secrets.key)
  --socket <path>            listen on this Unix socket instead of --host/--port (env SANDBOX_AGENT_SOCKET)
  --in-sandbox-port <n>      also answer the sandbox's own processes on 127.0.0.1:<n> without a token, as the
                             platform's daemon on 8080 (only for an agent alone in its network namespace)
  --process-wrapper <argv>   start every command through this argv prefix, JSON array or words (e.g. a capability drop)
  --working-dir <path>       sandbox path commands start in when they name no workingDir, created if missing
                             (default /; a launcher passes the image's WorkingDir)
  --memory-events <file>     cgroup file with an "oom_kill N" line: a process SIGKILLed while it grows is reported as OOM-killed
  --port-handoff             on the IPC channel the launcher started the agent with, connect to in-sandbox ports
                             for it and hand over the connected sockets (its proxy then speaks to the server directly)
  --egress-relay <p>=<a>:<q> relay connections to 127.0.0.1:<p> and [::1]:<p> inside the sandbox to <a>:<q>, the
                             simulator's egress for this sandbox (a container launcher, which has no IPC channel)
  --log-level <level>        fatal|error|warn|info|debug|trace|silent (default info; env LOG_LEVEL)
  --log-format <fmt>         auto|pretty|json: auto = readable lines on a terminal, JSON lines otherwise (env LOG_FORMAT)

  DISABLE_TERMINAL=true|1    turns the web terminal (/terminal, /terminal/ws) off: both answer 404
`;

const FLAG_OF: Record<string, string> = {
  dataDir: "data-dir",
  noAuth: "no-auth",
  uploadExpiryMs: "upload-expiry",
  maxOpenUploads: "max-open-uploads",
  maxPartSize: "max-part-size",
  sandboxName: "sandbox-name",
  processLogMaxBytes: "process-log-max",
  processStopGraceMs: "process-stop-grace",
  processHistory: "process-history",
  logLevel: "log-level",
  logFormat: "log-format",
  driveBackend: "drive-backend",
  drivesDir: "drives-dir",
  drivesExistingOnly: "drives-existing-only",
  driveMountCommand: "drive-mount-command",
  driveUnmountCommand: "drive-unmount-command",
  driveMountTimeoutMs: "drive-mount-timeout",
  mountProgram: "mount-program",
  umountProgram: "umount-program",
  metadataPath: "metadata-path",
  maxConnections: "max-connections",
  secretsKeyFile: "secrets-key-file",
  processWrapper: "process-wrapper",
  workingDir: "working-dir",
  inSandboxPort: "in-sandbox-port",
  memoryEvents: "memory-events",
  portHandoff: "port-handoff",
  egressRelay: "egress-relay",
};

export class ConfigError extends Error {}

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
