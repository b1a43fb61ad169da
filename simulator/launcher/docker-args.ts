import { writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { agentArgs, packageRootOf } from "./agent-main.js";
import { LaunchError, type LaunchSpec } from "./types.js";

/**
 * The `docker run` argv of a sandbox's agent (docs/launchers.md, docker):
 *   the image is spec.runtime.image; its tools (/usr, /bin, the shell) are what the sandbox's processes run with;
 *   /opt/sandbox-kit/bin/node      the host's node binary, read-only (the image needs a glibc compatible with it)
 *   /opt/sandbox-kit/{dist,node_modules,package.json}  this package, read-only (the agent and better-sqlite3)
 *   /                              the image's, with the sandbox's writes in the container's own layer: the agent's
 *                                  --root, so the file API and commands see one filesystem (kept between
 *                                  containers by docker commit: docker-files.ts)
 *   /run/sandbox-agent             the agent's state (database, upload parts, logs)
 *   /run/sandbox-drives            the workspace's drives
 *   each of spec.mounts            a volume's directory at its mountPath (read-only when the attachment says so)
 * The agent listens on 0.0.0.0:8080 inside, published on a free port of the host's loopback only, or,
 * with the simulator's egress, reached at the container's address on the sandbox's own network
 * (docker-network.ts), the system trust store then being a bundle with the egress proxy's CA and
 * /etc/hosts a file the simulator keeps current.
 * spec.runtime.envs travel in ENV_HANDOFF, a 0600 file of the data dir that the container's first program
 * (container-entry.ts) reads and deletes before it starts the agent: never in argv, never in the container's
 * config (docker inspect, a swarm's raft log, the images docker commit makes of the sandbox's files). The
 * token is not in the environment at all (every process of the sandbox could read /proc/<agent>/environ):
 * the launcher writes it to TOKEN_HANDOFF, and the agent reads and deletes it at start-up
 * (--token-file ... --token-file-remove).
 */

export const IN_CONTAINER = {
  pkg: "/opt/sandbox-kit",
  node: "/opt/sandbox-kit/bin/node",
  root: "/",
  data: "/run/sandbox-agent",
  drives: "/run/sandbox-drives",
} as const;
export const AGENT_PORT = 8080;
/** Where Debian-family images keep the system trust store (curl, git, OpenSSL, apt read it). */
const SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
/** The token hand-off file's name in the data dir (written 0600 by the launcher before each docker run). */
export const TOKEN_HANDOFF = "token.handoff";
/** The sandbox's variables' hand-off file in the data dir (JSON, written 0600 before each start; container-entry.ts). */
export const ENV_HANDOFF = "env.handoff";
/** The image when a sandbox names none (the simulator's sandboxes default to blaxel/base-image:latest). */
export const FALLBACK_IMAGE = "debian:bookworm-slim";
/** Labels that find a sandbox's container again (orphan reaping). */
export const DATA_DIR_LABEL = "sandbox-kit.data-dir";

export interface DockerRunInputs {
  /** Container name, unique per start. */
  name: string;
  /** The compiled agent on the host (<pkg>/dist/sandbox-agent/main.js). */
  agentMain: string;
  /** The host's node binary (realpath). */
  node: string;
  /** Host user the agent runs as, so files in the bind mounts stay the simulator's. */
  user: string;
  /** The image to run: the sandbox's files (docker-files.ts) or its image, resolved by the launcher. */
  image?: string;
  /**
   * The sandbox's own network (docker-network.ts), with the simulator's egress: the container joins it
   * instead of publishing the agent's port, the agent relays the simulator's address to `relay`
   * (`<port>=<gateway>:<port>`), and `caBundle` (a host file) is its system trust store.
   */
  network?: { name: string; relay: string; caBundle: string; hostsFile?: string };
}

/** A bind mount as `--mount` (never `-v`, which splits on ":"); `docker service create` takes the same syntax. */
export function bind(source: string, target: string, readonly = false): string[] {
  if (/[,"\n]/.test(source)) throw new LaunchError(`cannot bind-mount ${JSON.stringify(source)} into a container: the path holds a comma, quote or newline`);
  return ["--mount", `type=bind,source=${source},target=${target}${readonly ? ",readonly" : ""}`];
}

/** The variables handed to the sandbox through ENV_HANDOFF: its own (never the token); HOME is the image's unless it sets one. */
export function sandboxVariables(spec: Pick<LaunchSpec, "env">): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.env ?? {})) if (name !== "SANDBOX_AGENT_TOKEN") out[name] = value;
  return out;
}

/** Writes ENV_HANDOFF into the data dir (0600: only the agent's user reads it, and deletes it once read). */
export function writeEnvHandoff(spec: Pick<LaunchSpec, "env" | "dataDir">): void {
  writeFileSync(join(spec.dataDir, ENV_HANDOFF), JSON.stringify(sandboxVariables(spec)), { mode: 0o600 });
}

/**
 * The container's command: container-entry.ts (the sandbox's variables from ENV_HANDOFF), then the agent under
 * /opt/sandbox-kit, listening on 0.0.0.0:AGENT_PORT, the token from the hand-off file.
 */
export function agentCommand(spec: LaunchSpec, agentMain: string): string[] {
  const pkgRoot = packageRootOf(agentMain);
  const agentPath = `${IN_CONTAINER.pkg}/${relative(pkgRoot, agentMain)}`;
  const entry = `${IN_CONTAINER.pkg}/dist/simulator/launcher/container-entry.js`;
  const args = agentArgs({
    root: IN_CONTAINER.root,
    dataDir: IN_CONTAINER.data,
    sandbox: spec.sandbox,
    logLevel: spec.logLevel,
    drivesDir: spec.drivesDir ? IN_CONTAINER.drives : undefined,
  });
  // Inside the container the agent listens on every interface of its own network namespace, on a fixed port.
  args.splice(args.indexOf("--host"), 4, "--host", "0.0.0.0", "--port", String(AGENT_PORT));
  return [entry, `${IN_CONTAINER.data}/${ENV_HANDOFF}`, agentPath, ...args, "--token-file", `${IN_CONTAINER.data}/${TOKEN_HANDOFF}`, "--token-file-remove"];
}

/** The `--mount` flags: node and this package read-only, the sandbox's data and drives, its volumes (its files are the container's own layer). */
export function containerMounts(
  spec: LaunchSpec,
  inputs: Pick<DockerRunInputs, "agentMain" | "node"> & { network?: Pick<NonNullable<DockerRunInputs["network"]>, "caBundle" | "hostsFile"> },
): string[] {
  const pkg = packageRootOf(inputs.agentMain);
  return [
    ...bind(inputs.node, IN_CONTAINER.node, true),
    ...bind(`${pkg}/package.json`, `${IN_CONTAINER.pkg}/package.json`, true),
    ...bind(`${pkg}/dist`, `${IN_CONTAINER.pkg}/dist`, true),
    ...bind(`${pkg}/node_modules`, `${IN_CONTAINER.pkg}/node_modules`, true),
    ...bind(spec.dataDir, IN_CONTAINER.data),
    ...(spec.drivesDir ? bind(spec.drivesDir, IN_CONTAINER.drives) : []),
    ...(inputs.network ? bind(inputs.network.caBundle, SYSTEM_CA_BUNDLE, true) : []),
    // The simulator's names (its --public-url host, host-form previews) kept current in a file of our own (docker-network.ts).
    ...(inputs.network?.hostsFile ? bind(inputs.network.hostsFile, "/etc/hosts", true) : []),
    ...(spec.mounts ?? []).flatMap((m) => bind(m.source, m.target, m.readOnly)),
  ];
}

export function dockerRunArgs(spec: LaunchSpec, inputs: DockerRunInputs): string[] {
  return [
    "run",
    "--detach",
    "--init",
    "--name",
    inputs.name,
    "--label",
    `${DATA_DIR_LABEL}=${spec.dataDir}`,
    "--label",
    `sandbox-kit.sandbox=${spec.workspace}/${spec.sandbox}`,
    "--hostname",
    spec.sandbox.slice(0, 63),
    "--user",
    inputs.user,
    ...(inputs.network ? ["--network", inputs.network.name] : ["--publish", `127.0.0.1::${AGENT_PORT}`]),
    ...containerMounts(spec, inputs),
    // No --workdir: the image's WorkingDir, as on the platform. No --env: ENV_HANDOFF.
    "--entrypoint",
    IN_CONTAINER.node,
    inputs.image ?? spec.image ?? FALLBACK_IMAGE,
    ...agentCommand(spec, inputs.agentMain),
    ...(inputs.network ? ["--egress-relay", inputs.network.relay] : []),
  ];
}

/** The docker CLI's environment: what it needs to reach the daemon (PATH, DOCKER_*, its config dir), nothing of the simulator's own. */
export function dockerCliEnv(host: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(host)) if (k === "PATH" || k.startsWith("DOCKER_") || k.startsWith("XDG_")) env[k] = v;
  if (!env.DOCKER_CONFIG && host.HOME) env.DOCKER_CONFIG = `${host.HOME}/.docker`;
  return env;
}
