import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { z } from "zod";
import { parseDuration } from "../src/units.js";

/** The SDK's default image (SandboxInstance.create). */
export const DEFAULT_SANDBOX_IMAGE = "blaxel/base-image:latest";

/** Command-line options, then environment fallbacks, validated into one frozen object. */
export const SIM_OPTIONS = {
  host: { type: "string" },
  port: { type: "string" },
  data: { type: "string" },
  seed: { type: "string" },
  workspace: { type: "string" },
  "api-key": { type: "string" },
  "test-hooks": { type: "boolean" },
  "public-url": { type: "string" },
  launcher: { type: "string" },
  "swarm-constraint": { type: "string", multiple: true },
  "swarm-registry": { type: "string" },
  "sandbox-network": { type: "string" },
  "sandbox-retention": { type: "string" },
  "standby-after": { type: "string" },
  "preview-urls": { type: "string" },
  "image-source": { type: "string" },
  "image-cache": { type: "string" },
  "start-concurrency": { type: "string" },
  "app-listen-timeout": { type: "string" },
  prebuild: { type: "string" },
  "warm-sandboxes": { type: "string" },
  "agent-mode": { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
  "write-env": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

const NAME = /^[a-z0-9]([a-z0-9-]{0,47}[a-z0-9])?$/;

export const SimConfigSchema = z.object({
  host: z.string().min(1).default("127.0.0.1"),
  port: z.coerce.number().int().min(0).max(65535).default(8081),
  /** ":memory:" unless --data names a file; both take the same code path. */
  data: z
    .string()
    .min(1)
    .default(":memory:")
    .transform((p) => (p === ":memory:" ? p : resolve(p))),
  seed: z
    .string()
    .min(1)
    .optional()
    .transform((p) => (p ? resolve(p) : undefined)),
  workspace: z.string().regex(NAME, "lowercase letters, digits and '-', at most 49 characters").default("default"),
  apiKey: z.string().min(8, "at least 8 characters").optional(),
  testHooks: z.boolean().default(false),
  /** Base URL written into resource `metadata.url`; defaults to the listen address. */
  publicUrl: z.url().optional(),
  /** How each sandbox's agent runs (simulator/launcher, docs/launchers.md). */
  launcher: z.enum(["process", "bwrap", "docker", "swarm"]).default("bwrap"),
  /** Placement constraints of every sandbox with --launcher swarm (docker's syntax, e.g. node.labels.pool==sandboxes). */
  swarmConstraints: z.array(z.string().regex(/^[\w.-]+\s*(==|!=)\s*\S.*$/, "a swarm constraint: <attribute>==<value> or <attribute>!=<value>")).default([]),
  /** A registry every swarm node pulls from (host:port[/path]); sandbox images are pushed there before their services start. */
  swarmRegistry: z
    .string()
    .regex(/^[a-zA-Z0-9.-]+(:\d+)?(\/[a-z0-9._/-]+)?$/, "host[:port][/path] of a registry")
    .optional(),
  /** Outbound network from isolated sandboxes (slirp4netns), or none (loopback only). */
  sandboxNetwork: z.enum(["outbound", "none"]).default("outbound"),
  /** How long a deleted sandbox's files are kept, in ms (simulator clock); 0 = removed at once. */
  sandboxRetentionMs: z
    .union([z.number().int().min(0), z.string()])
    .default(3_600_000)
    .transform((v, ctx) => {
      if (typeof v === "number") return v;
      if (v.trim() === "0") return 0;
      try {
        return parseDuration(v, ["s", "m", "h", "d"]);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: `${(e as Error).message}, or 0` });
        return z.NEVER;
      }
    }),
  /** How long an application may take to answer on its port before it is FAILED, in ms (real time; simulator/applications). */
  applicationListenTimeoutMs: z
    .union([z.number().int().min(1), z.string()])
    .default(120_000)
    .transform((v, ctx) => {
      if (typeof v === "number") return v;
      try {
        return parseDuration(v, ["ms", "s", "m"]);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: (e as Error).message });
        return z.NEVER;
      }
    }),
  /** How long a sandbox is idle before it goes to standby, in ms (real time); 0 = never (simulator/standby). */
  standbyAfterMs: z
    .union([z.number().int().min(0), z.string()])
    .default(15_000)
    .transform((v, ctx) => {
      if (typeof v === "number") return v;
      if (v.trim() === "0") return 0;
      try {
        return parseDuration(v, ["ms", "s", "m", "h"]);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: `${(e as Error).message}, or 0 (never)` });
        return z.NEVER;
      }
    }),
  /** The form of previews' spec.url: "path" (resolves everywhere) or "host" (<label>.preview.localhost; simulator/previews/urls.ts). */
  previewUrls: z.enum(["path", "host"]).default("path"),
  /** Where sandboxes' root filesystems come from (docs/images.md): the image store, or the host's root (today's speed, no images). */
  imageSource: z.enum(["store", "host"]).default("store"),
  /** The image store's directory; "local" = <data dir>/images; unset = the per-user cache (~/.cache/sandbox-kit/images). */
  imageCache: z
    .string()
    .min(1)
    .optional()
    .transform((p) => (p && p !== "local" ? resolve(p) : p)),
  /** How many sandboxes' agents start at once; the rest wait in arrival order (simulator/launcher/start-queue.ts). */
  startConcurrency: z.coerce.number().int().min(1).max(256).optional(),
  /** An image built in the background at start ("none": nothing); the command line defaults to the SDK's default image. */
  prebuild: z.string().min(1).default("none"),
  /** Sandboxes kept started ahead of need (namespaces, network, the agent loaded), taken over by creates and refilled. */
  warmSandboxes: z.coerce.number().int().min(0).max(64).default(2),
  /**
   * Who serves an isolated (bwrap) sandbox's agent API: the agent host in the simulator (no Node process per
   * sandbox: simulator/agent-host), or an agent process in each sandbox. auto (the default): the host where it can
   * run here.
   */
  agentMode: z.enum(["auto", "host", "process"]).default("auto"),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  logFormat: z.enum(["auto", "pretty", "json"]).default("auto"),
  /** Also write the SDK's variables to this file as dotenv lines (KEY=value), for `--env-file`-style loaders. */
  writeEnv: z
    .string()
    .min(1)
    .optional()
    .transform((p) => (p ? resolve(p) : undefined)),
});

export type SimConfig = Readonly<z.infer<typeof SimConfigSchema>>;

export const SIM_USAGE = `Usage: sandbox-sim [options]
       sandbox-sim images <command>   build, import, list and remove images (sandbox-sim images --help)

  --port <n>            listen port, 0 picks a free one (default 8081; env PORT)
  --host <addr>         listen address (default 127.0.0.1; env SANDBOX_SIM_HOST)
  --data <file.db>      keep state in this SQLite file (default: in memory; env SANDBOX_SIM_DATA)
  --seed <file.json>    accounts, workspaces and users to create at start (same shape as POST /_sim/seed)
  --workspace <name>    the default workspace (default "default"; env SANDBOX_SIM_WORKSPACE)
  --api-key <key>       the admin API key (env SANDBOX_SIM_API_KEY; generated when absent)
  --test-hooks          enable /_sim/* control routes and fault injection (never on by default)
  --public-url <url>    base URL written into resource metadata.url (default: the listen URL)
  --launcher <name>     how sandboxes' agents run: bwrap (default: isolated namespaces; needs bubblewrap,
                        util-linux and user namespaces), process (NO isolation: commands run on the host)
                        docker (a container of spec.runtime.image; needs a Docker daemon) or swarm (a service
                        per sandbox on a Docker Swarm, through the manager at DOCKER_HOST or the local socket);
                        env SANDBOX_SIM_LAUNCHER
  --swarm-constraint <c>  with --launcher swarm: where sandboxes may run, e.g. node.labels.pool==sandboxes
                        (repeatable; passed to the swarm's scheduler)
  --swarm-registry <r>  with --launcher swarm: a registry every node pulls from (host:port); sandbox images are
                        pushed there first. Without it images stay on the manager's node (env SANDBOX_SIM_SWARM_REGISTRY)
  --sandbox-network <m> outbound (default: sandboxes reach the network through slirp4netns, never the host's
                        loopback) or none (loopback only); env SANDBOX_SIM_SANDBOX_NETWORK
  --sandbox-retention <dur>  keep a deleted sandbox's files this long, e.g. 30m, 1h, 7d; 0 = remove at once
                        (default 1h; env SANDBOX_SIM_SANDBOX_RETENTION)
  --standby-after <dur> a sandbox with no request, no open stream and no running keepAlive process for this long
                        goes to standby (its processes stop in place; any request resumes it), e.g. 15s, 2m,
                        500ms; 0 = never (default 15s; env SANDBOX_SIM_STANDBY_AFTER)
  --preview-urls <form> path (default: <url>/<ws>/sandboxes/<sb>/previews/<name>) or host
                        (<label>.preview.localhost:<port>, as on the platform); both forms are served
  --image-source <src>  store (default: images are root filesystems from the image store, docs/images.md)
                        or host (the host's root read-only, no images; env SANDBOX_SIM_IMAGE_SOURCE)
  --image-cache <dir>   the image store, shared by simulators (default ~/.cache/sandbox-kit/images;
                        "local" = beside the --data file; env SANDBOX_SIM_IMAGE_CACHE)
  --start-concurrency <n>  how many sandboxes start at once; the others wait their turn, DEPLOYING, in arrival
                        order (default: one per CPU, at least 2; env SANDBOX_SIM_START_CONCURRENCY)
  --app-listen-timeout <dur>  how long an application's program may take to answer on its port (spec.port, default
                        8080) before the application is FAILED, e.g. 30s, 2m (default 2m; env SANDBOX_SIM_APP_LISTEN_TIMEOUT)
  --prebuild <image>    build this image in the background at start, so the first create does not wait for it
                        (default blaxel/base-image, the SDK's default; none = build on first use;
                        env SANDBOX_SIM_PREBUILD). Only with --image-source store and the bwrap launcher
  --warm-sandboxes <n>  sandboxes kept started ahead of need, each taken whole by one create and replaced in the
                        background, with an agent per sandbox only (default 2, 0 = none; env
                        SANDBOX_SIM_WARM_SANDBOXES)
  --agent-mode <mode>   who serves an isolated sandbox's agent API: auto (default: the simulator's agent host where
                        openat2, nsexec and the netns addon are here, else an agent in each sandbox), host (the
                        agent host or fail: a sandbox then runs no Node process) or process (an agent in each
                        sandbox, and the warm pool; env SANDBOX_SIM_AGENT_MODE)
  --log-level <level>   fatal|error|warn|info|debug|trace|silent (default info; env LOG_LEVEL)
  --log-format <fmt>    auto|pretty|json: auto = readable lines on a terminal, JSON lines otherwise (env LOG_FORMAT)
  --write-env <file>    also write the SDK's variables (BL_API_URL, ...) to <file> as dotenv lines
`;

const FLAG_OF: Record<string, string> = {
  sandboxNetwork: "sandbox-network",
  apiKey: "api-key",
  testHooks: "test-hooks",
  publicUrl: "public-url",
  logLevel: "log-level",
  logFormat: "log-format",
  writeEnv: "write-env",
  sandboxRetentionMs: "sandbox-retention",
  standbyAfterMs: "standby-after",
  previewUrls: "preview-urls",
  imageSource: "image-source",
  imageCache: "image-cache",
  startConcurrency: "start-concurrency",
  applicationListenTimeoutMs: "app-listen-timeout",
  warmSandboxes: "warm-sandboxes",
  agentMode: "agent-mode",
  swarmConstraints: "swarm-constraint",
  swarmRegistry: "swarm-registry",
};

export class ConfigError extends Error {}

export function parseSimConfig(argv: string[], env: NodeJS.ProcessEnv): SimConfig | "help" {
  let values: Record<string, string | string[] | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: SIM_OPTIONS, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  if (values.help) return "help";
  const parsed = SimConfigSchema.safeParse({
    host: values.host ?? env.SANDBOX_SIM_HOST,
    port: values.port ?? env.PORT,
    data: values.data ?? env.SANDBOX_SIM_DATA,
    seed: values.seed,
    workspace: values.workspace ?? env.SANDBOX_SIM_WORKSPACE,
    apiKey: values["api-key"] ?? (env.SANDBOX_SIM_API_KEY || undefined),
    testHooks: values["test-hooks"] ?? false,
    publicUrl: values["public-url"],
    launcher: values.launcher ?? env.SANDBOX_SIM_LAUNCHER,
    swarmConstraints: values["swarm-constraint"],
    swarmRegistry: values["swarm-registry"] ?? (env.SANDBOX_SIM_SWARM_REGISTRY || undefined),
    sandboxNetwork: values["sandbox-network"] ?? (env.SANDBOX_SIM_SANDBOX_NETWORK || undefined),
    sandboxRetentionMs: values["sandbox-retention"] ?? (env.SANDBOX_SIM_SANDBOX_RETENTION || undefined),
    standbyAfterMs: values["standby-after"] ?? (env.SANDBOX_SIM_STANDBY_AFTER || undefined),
    previewUrls: values["preview-urls"] ?? (env.SANDBOX_SIM_PREVIEW_URLS || undefined),
    imageSource: values["image-source"] ?? (env.SANDBOX_SIM_IMAGE_SOURCE || undefined),
    imageCache: values["image-cache"] ?? (env.SANDBOX_SIM_IMAGE_CACHE || undefined),
    startConcurrency: values["start-concurrency"] ?? (env.SANDBOX_SIM_START_CONCURRENCY || undefined),
    applicationListenTimeoutMs: values["app-listen-timeout"] ?? (env.SANDBOX_SIM_APP_LISTEN_TIMEOUT || undefined),
    prebuild: values.prebuild ?? (env.SANDBOX_SIM_PREBUILD || DEFAULT_SANDBOX_IMAGE),
    warmSandboxes: values["warm-sandboxes"] ?? (env.SANDBOX_SIM_WARM_SANDBOXES || undefined),
    agentMode: values["agent-mode"] ?? (env.SANDBOX_SIM_AGENT_MODE || undefined),
    logLevel: values["log-level"] ?? env.LOG_LEVEL,
    logFormat: values["log-format"] ?? (env.LOG_FORMAT || undefined),
    writeEnv: values["write-env"],
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`--${FLAG_OF[String(issue.path[0])] ?? String(issue.path[0])}: ${issue.message}`);
  }
  return Object.freeze(parsed.data);
}
