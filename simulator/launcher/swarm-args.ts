import { createHash } from "node:crypto";
import { AGENT_PORT, agentCommand, containerMounts, FALLBACK_IMAGE, IN_CONTAINER, DATA_DIR_LABEL, type DockerRunInputs } from "./docker-args.js";
import type { LaunchSpec } from "./types.js";

/**
 * The `docker service create` argv of a sandbox's agent on a swarm (docs/launchers.md, swarm). The container is
 * the docker launcher's (docker-args.ts: the image, node and this package bind-mounted read-only, the sandbox's
 * root, data and drives read-write, `-e NAME` only, the token in the data dir's hand-off file), as a service:
 *   one replica, restart condition none   a crash is the agent's exit, which the simulator's supervisor handles
 *                                         (restart with backoff, or FAILED), as for every launcher
 *   --limit-memory                        spec.runtime.memory
 *   --constraint                          each `--swarm-constraint`, passed through to the scheduler
 *   --publish mode=host,target=8080       the agent on a port the engine picks on whichever node runs the task,
 *                                         reached at that node's address (ingress needs IPVS, which not every
 *                                         kernel has, and adds a hop; an overlay IP is unreachable from a host)
 *   --network sandbox-kit-<workspace>     the workspace's own overlay: its sandboxes share it, other workspaces'
 *                                         sandboxes are on networks of their own
 *   --egress-tunnel <simulator port>      the simulator's address inside, led to its egress over tunnels the
 *                                         simulator opens to the agent (swarm-egress.ts)
 *   labels                                workspace, sandbox, data dir and the owning simulator, so a later run
 *                                         finds (and reaps) what a killed one left
 */

export const SWARM_LABELS = {
  /** Every service this launcher creates. */
  kind: "sandbox-kit.kind",
  workspace: "sandbox-kit.workspace",
  sandbox: "sandbox-kit.sandbox",
  dataDir: DATA_DIR_LABEL,
  /** `<hostname>/<pid>/<process start>` of the simulator that created it: orphaned once that process is gone. */
  owner: "sandbox-kit.owner",
  /** The sandbox's root on the simulator's host and the image its files started from: a reaped service's layer is kept there. */
  rootDir: "sandbox-kit.root-dir",
  baseImage: "sandbox-kit.base-image",
} as const;
export const SWARM_KIND = "swarm-sandbox";

export interface SwarmServiceInputs extends Pick<DockerRunInputs, "agentMain" | "node" | "user"> {
  /** Service name, unique per start. */
  name: string;
  /** The image reference the nodes run (a registry's copy when --swarm-registry is set). */
  image: string;
  /** The sandbox's image its files started from (docker-files.ts), for the label that keeps them when the service is reaped. */
  base?: string;
  /** The workspace's overlay network. */
  network: string;
  owner: string;
  constraints: string[];
  /** False when the image is only in local image stores: the CLI then does not ask a registry for its digest. */
  resolveImage: boolean;
  stopGraceSeconds: number;
  /** The node whose engine alone holds the sandbox's files (docker-files.ts, a swarm without a registry). */
  pinnedNode?: string;
  /** The simulator's egress for this sandbox: the agent's tunnel port (swarm-egress.ts), its trust bundle and hosts file (as with docker). */
  egress?: { tunnelPort: number; caBundle: string; hostsFile: string };
}

/** A name Docker accepts (services and networks: [a-zA-Z0-9_.-], at most 63), unique for distinct inputs. */
export function swarmName(prefix: string, ...parts: string[]): string {
  const readable = parts
    .join("-")
    .replace(/[^a-zA-Z0-9_.-]/g, "-")
    .replace(/^[^a-zA-Z0-9]+/, "");
  const hash = createHash("sha256").update(parts.join("\0")).digest("hex").slice(0, 8);
  return `${prefix}-${readable.slice(0, 63 - prefix.length - 10)}-${hash}`;
}

/** The workspace's overlay network (one per workspace; created attachable so a simulator in a container on the swarm can join it). */
export function workspaceNetwork(workspace: string): string {
  return swarmName("sandbox-kit", workspace);
}

/** The image a spec runs: its own, else the launcher's default. */
export function specImage(spec: Pick<LaunchSpec, "image">, fallback?: string): string {
  return spec.image ?? fallback ?? FALLBACK_IMAGE;
}

export function swarmServiceArgs(spec: LaunchSpec, inputs: SwarmServiceInputs): string[] {
  return [
    "service",
    "create",
    "--detach",
    "--quiet",
    "--init",
    "--name",
    inputs.name,
    "--replicas",
    "1",
    "--restart-condition",
    "none",
    "--stop-grace-period",
    `${inputs.stopGraceSeconds}s`,
    ...(inputs.resolveImage ? [] : ["--no-resolve-image"]),
    "--label",
    `${SWARM_LABELS.kind}=${SWARM_KIND}`,
    "--label",
    `${SWARM_LABELS.workspace}=${spec.workspace}`,
    "--label",
    `${SWARM_LABELS.sandbox}=${spec.sandbox}`,
    "--label",
    `${SWARM_LABELS.dataDir}=${spec.dataDir}`,
    "--label",
    `${SWARM_LABELS.owner}=${inputs.owner}`,
    ...(inputs.base ? ["--label", `${SWARM_LABELS.rootDir}=${spec.rootDir}`, "--label", `${SWARM_LABELS.baseImage}=${inputs.base}`] : []),
    "--container-label",
    `${SWARM_LABELS.sandbox}=${spec.workspace}/${spec.sandbox}`,
    ...(spec.memoryMb ? ["--limit-memory", `${spec.memoryMb}M`] : []),
    ...inputs.constraints.flatMap((c) => ["--constraint", c]),
    ...(inputs.pinnedNode ? ["--constraint", `node.id==${inputs.pinnedNode}`] : []),
    "--network",
    inputs.network,
    "--publish",
    `mode=host,target=${AGENT_PORT},protocol=tcp`,
    "--hostname",
    spec.sandbox.slice(0, 63),
    "--user",
    inputs.user,
    ...containerMounts(spec, { agentMain: inputs.agentMain, node: inputs.node, network: inputs.egress }),
    // No --workdir (the image's) and no --env (docker-args.ts ENV_HANDOFF: a service's env sits in the raft log).
    "--entrypoint",
    IN_CONTAINER.node,
    inputs.image,
    ...agentCommand(spec, inputs.agentMain),
    ...(inputs.egress ? ["--egress-tunnel", String(inputs.egress.tunnelPort)] : []),
  ];
}

/** The registry's name for an image: `<registry>/<path>` (a registry host in the source reference dropped). */
export function registryRef(registry: string, image: string): string {
  const parts = image.split("/");
  const hasHost = parts.length > 1 && /[.:]|^localhost$/.test(parts[0]!);
  return `${registry.replace(/\/+$/, "")}/${(hasHost ? parts.slice(1) : parts).join("/")}`;
}
