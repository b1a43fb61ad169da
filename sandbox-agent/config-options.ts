/**
 * The agent's command line as tables: the options parseArgs accepts, the usage text, and the flag each
 * config key comes from. What they mean, and the validation, is config.ts.
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
  "egress-tunnel": { type: "string" },
  confinement: { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export const AGENT_USAGE = `Usage: sandbox-agent [options]

  --host <addr>              listen address (default 127.0.0.1; env SANDBOX_AGENT_HOST)
  --port <n>                 listen port, 0 picks a free one (default 8080; env PORT)
  --root <dir>               sandbox root every API path is confined under, created when missing
                             (default ./.sandbox/root; env SANDBOX_AGENT_ROOT)
  --confinement <mode>       auto (default): the kernel confines paths under --root with openat2 (Linux >= 5.6),
                             else path-checks (the agent's own descriptor walk); env SANDBOX_AGENT_CONFINEMENT
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
  --egress-tunnel <p>        hand connections to 127.0.0.1:<p> and [::1]:<p> inside the sandbox to the launcher over
                             tunnels it opens to the agent (GET /egress-tunnel with the token, an HTTP upgrade)
  --log-level <level>        fatal|error|warn|info|debug|trace|silent (default info; env LOG_LEVEL)
  --log-format <fmt>         auto|pretty|json: auto = readable lines on a terminal, JSON lines otherwise (env LOG_FORMAT)

  DISABLE_TERMINAL=true|1    turns the web terminal (/terminal, /terminal/ws) off: both answer 404
`;

/** The command-line flag of each config key, for validation messages (`--port: ...`). */
export const FLAG_OF: Record<string, string> = {
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
  egressTunnel: "egress-tunnel",
};

/** A bad option or flag combination: the agent says why and exits (2) instead of starting. */
export class ConfigError extends Error {}
