import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Where the compiled agent is. From dist/ (npm start) it sits beside this
 * module's compiled copy; from sources (vitest) it is the repo's dist/, which
 * `npm test` builds before vitest starts.
 */
export function agentMainPath(): string {
  const candidates = [
    fileURLToPath(new URL("../../sandbox-agent/main.js", import.meta.url)),
    fileURLToPath(new URL("../../dist/sandbox-agent/main.js", import.meta.url)),
  ];
  const found = candidates.find((c) => existsSync(c));
  if (!found) throw new Error(`the compiled sandbox-agent is missing (looked at ${candidates.join(", ")}): run npm run build`);
  return found;
}

/** The package root holding dist/ and node_modules/ for a given agent main (<root>/dist/sandbox-agent/main.js). */
export function packageRootOf(agentMain: string): string {
  return resolve(dirname(agentMain), "../..");
}

/** The agent's command-line arguments, the same under every launcher but for paths. */
export function agentArgs(opts: { root: string; dataDir: string; sandbox: string; logLevel?: string; drivesDir?: string }): string[] {
  const args = [
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--root",
    opts.root,
    "--data-dir",
    opts.dataDir,
    "--sandbox-name",
    opts.sandbox,
    "--log-level",
    opts.logLevel ?? "warn",
  ];
  // The workspace's drives are control-plane resources: the agent mounts those that exist, never creates one.
  if (opts.drivesDir) args.push("--drives-dir", opts.drivesDir, "--drives-existing-only");
  return args;
}

/**
 * The agent's environment: the sandbox's own variables and the token, plus the
 * few host variables a shell needs, never the simulator's (its API keys).
 * The token travels in the environment, not argv, so `ps` on the host does not
 * show it — but every process of the sandbox can read /proc/<agent>/environ:
 * launchers that exec the agent use agentEnvWithoutToken and --token-fd
 * (AGENT_TOKEN_FD) instead; this one stays for the warm agent's activation
 * message (an IPC message is not in environ).
 */
export function agentEnv(spec: { env?: Record<string, string>; token: string }, home: string): NodeJS.ProcessEnv {
  const keep = ["PATH", "LANG", "LC_ALL", "TZ", "TERM"];
  const env: NodeJS.ProcessEnv = {};
  for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
  env.PATH ??= "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  env.HOME = home;
  Object.assign(env, spec.env ?? {});
  env.SANDBOX_AGENT_TOKEN = spec.token;
  return env;
}

/** The descriptor the launchers hand the token on: a pipe the agent reads to its end and closes (--token-fd). */
export const AGENT_TOKEN_FD = 3;

/**
 * V8 flags of every sandbox's agent: a young generation of at most 2 MiB per
 * semi-space (V8's default grows to 16) keeps ~5 MiB less heap per idle agent,
 * and an agent's allocations are small objects around streamed Buffers. Any V8
 * flag also makes Node compile its own built-in modules from source (its embedded
 * code cache is bound to V8's default flags): ~20 ms more CPU per start, against
 * ~8 MiB more memory per used agent without it (docs/launchers.md).
 */
export const AGENT_NODE_FLAGS = ["--max-semi-space-size=2"];

/** agentEnv without the token, for an agent exec'd with `--token-fd` (its environ is readable from the sandbox). */
export function agentEnvWithoutToken(spec: { env?: Record<string, string> }, home: string): NodeJS.ProcessEnv {
  const env = agentEnv({ ...spec, token: "" }, home);
  delete env.SANDBOX_AGENT_TOKEN;
  return env;
}
