import { realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { packageRootOf, agentMainPath } from "../launcher/agent-main.js";
import { runDocker } from "../launcher/docker-cli.js";
import { ENGINE_LABEL } from "../launcher/swarm-nodes.js";
import { ensureNodeImage } from "./node-image.js";

/**
 * A Docker Swarm cluster on this one machine (`npm run cluster -- up|down|status`): a manager and workers, each
 * a node with its own Docker daemon, address and storage — a Docker-in-Docker container of the node image
 * (node-image.ts) on a bridge network of the cluster's own, its /var/lib/docker a volume of its own — joined
 * into one swarm, with a registry (Debian's docker-registry) on the manager that every node trusts. Each daemon
 * also listens on tcp://<node address>:2375 (on the cluster's bridge only, which is the host's and the nodes'):
 * the simulator reaches the manager there (DOCKER_HOST), and a node's own engine for what only it can do
 * (commit or pause a task's container: the node label sandbox-kit.engine, swarm-nodes.ts).
 * A node is not `--privileged` (refused on these machines: CAP_SYS_RESOURCE is not in the host's bounding set):
 * every capability but that one, seccomp and AppArmor unconfined, the host's cgroups.
 * Sandboxes bind-mount the package, node and their data dirs at the simulator's paths, so those are shared into
 * every node at the same paths (the shared storage a cluster needs, docs/launchers.md): the package read-only,
 * the node binary, and each `share` directory (default: the temp dir, where a simulator without --data keeps
 * its sandboxes). Everything carries the label sandbox-kit.cluster=<name>, which `down` removes by id.
 */
export const CLUSTER_LABEL = "sandbox-kit.cluster";
export const ENGINE_PORT = 2375;
export const REGISTRY_PORT = 5000;
/** The registry's configuration in the manager's container (kept across its restarts). */
const REGISTRY_CONFIG = "/etc/sandbox-kit-registry.yml";

export interface ClusterOptions {
  name?: string;
  workers?: number;
  /** Host directories every node sees at the same path (default: the temp dir). */
  share?: string[];
  docker?: string;
  log?: (line: string) => void;
}

export interface ClusterNode {
  name: string;
  role: "manager" | "worker";
  container: string;
  address: string;
  state: string;
  /** The swarm's view: ready | down | ... (status only). */
  swarm?: string;
}

export interface ClusterInfo {
  name: string;
  network?: string;
  nodes: ClusterNode[];
  /** DOCKER_HOST of the manager, the registry's host:port. */
  dockerHost?: string;
  registry?: string;
}

const nodeName = (cluster: string, role: string) => `${cluster}-${role}`;

export class Cluster {
  readonly name: string;
  private readonly docker: string;
  private readonly log: (line: string) => void;

  constructor(private readonly options: ClusterOptions = {}) {
    this.name = options.name ?? "sbxk-cluster";
    this.docker = options.docker ?? "docker";
    this.log = options.log ?? (() => {});
  }

  /** The host's daemon (or, with `host`, a node's engine); throws with docker's reason. */
  private async sh(args: string[], host?: string, timeoutMs = 120_000): Promise<string> {
    const env = host ? { ...process.env, DOCKER_HOST: host } : process.env;
    const ran = await runDocker(this.docker, args, env, timeoutMs);
    if (ran.code !== 0)
      throw new Error(
        `docker ${args.slice(0, 3).join(" ")}${host ? ` (on ${host})` : ""} failed: ${ran.stderr.trim().split("\n").pop() ?? `exit ${ran.code}`}`,
      );
    return ran.stdout.trim();
  }

  private async ids(kind: "container" | "volume" | "network"): Promise<string[]> {
    const args =
      kind === "container"
        ? ["ps", "--all", "--quiet", "--no-trunc", "--filter", `label=${CLUSTER_LABEL}=${this.name}`]
        : [kind, "ls", "--quiet", "--filter", `label=${CLUSTER_LABEL}=${this.name}`];
    return (await this.sh(args)).split("\n").filter(Boolean);
  }

  /** Starts the nodes (each waits for its daemon), makes the swarm and the registry; resolves with the cluster. */
  async up(): Promise<ClusterInfo> {
    if ((await this.ids("container")).length > 0) throw new Error(`cluster ${this.name} exists: npm run cluster -- down first (or status)`);
    const image = await ensureNodeImage(this.docker, this.log);
    const network = nodeName(this.name, "net");
    await this.sh(["network", "create", "--driver", "bridge", "--label", `${CLUSTER_LABEL}=${this.name}`, network]);
    const subnet = await this.sh(["network", "inspect", "--format", "{{(index .IPAM.Config 0).Subnet}}", network]);
    const shared = [...new Set((this.options.share ?? [tmpdir()]).map((p) => realpathSync(p)))];
    const pkg = packageRootOf(realpathSync(agentMainPath()));
    const node = realpathSync(process.execPath);
    const roles = ["manager", ...Array.from({ length: this.options.workers ?? 2 }, (_, i) => `worker-${i + 1}`)];
    this.log(`starting ${roles.length} nodes on ${network} (${subnet})`);
    const nodes: ClusterNode[] = [];
    for (const role of roles) {
      const name = nodeName(this.name, role);
      const volume = await this.sh(["volume", "create", "--label", `${CLUSTER_LABEL}=${this.name}`, `${name}-docker`]);
      const container = await this.sh([
        "run",
        "--detach",
        "--name",
        name,
        "--hostname",
        name,
        "--label",
        `${CLUSTER_LABEL}=${this.name}`,
        "--label",
        `${CLUSTER_LABEL}.role=${role === "manager" ? "manager" : "worker"}`,
        "--network",
        network,
        // Not --privileged (refused here): every capability but CAP_SYS_RESOURCE, nothing confined.
        "--cap-add",
        "ALL",
        "--cap-drop",
        "SYS_RESOURCE",
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--cgroupns",
        "host",
        "--volume",
        "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        "--volume",
        "/lib/modules:/lib/modules:ro",
        "--tmpfs",
        "/run",
        "--mount",
        `type=volume,source=${volume},target=/var/lib/docker`,
        "--mount",
        `type=bind,source=${pkg},target=${pkg},readonly`,
        "--mount",
        `type=bind,source=${node},target=${node},readonly`,
        ...shared.flatMap((dir) => ["--mount", `type=bind,source=${dir},target=${dir}`]),
        image,
        // Tasks' traffic out of the node (docker_gwbridge) leaves with the node's address: with --iptables=false
        // dockerd masquerades nothing, and every node's gwbridge has the same subnet, so replies could not return.
        "sh",
        "-c",
        // A manager started again (its container restarted) serves its registry again, from the same volume.
        `iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE || echo "no NAT for the node's containers" >&2; ` +
          `if [ -f ${REGISTRY_CONFIG} ]; then docker-registry serve ${REGISTRY_CONFIG} & fi; exec "$@"`,
        "node-init",
        "dockerd",
        "--host",
        "unix:///var/run/docker.sock",
        "--host",
        `tcp://0.0.0.0:${ENGINE_PORT}`,
        "--insecure-registry",
        subnet,
        // Nodes publish through docker-proxy; the one NAT rule their tasks need is set above.
        "--iptables=false",
      ]);
      const address = await this.sh(["inspect", "--format", `{{(index .NetworkSettings.Networks "${network}").IPAddress}}`, container]);
      nodes.push({ name, role: role === "manager" ? "manager" : "worker", container, address, state: "running" });
    }
    await Promise.all(nodes.map((n) => this.waitEngine(n)));
    const [manager, ...workers] = nodes;
    const managerHost = `tcp://${manager!.address}:${ENGINE_PORT}`;
    await this.sh(["swarm", "init", "--advertise-addr", manager!.address], managerHost);
    const token = await this.sh(["swarm", "join-token", "--quiet", "worker"], managerHost);
    for (const w of workers) await this.sh(["swarm", "join", "--token", token, `${manager!.address}:2377`], `tcp://${w.address}:${ENGINE_PORT}`);
    // Each node's own engine, for the launcher (swarm-nodes.ts): by node id, as the manager lists them.
    for (const n of nodes) {
      const id = await this.sh(["info", "--format", "{{.Swarm.NodeID}}"], `tcp://${n.address}:${ENGINE_PORT}`);
      await this.sh(["node", "update", "--label-add", `${ENGINE_LABEL}=tcp://${n.address}:${ENGINE_PORT}`, id], managerHost);
    }
    // Debian's default config asks for htpasswd auth: a config of our own, the blobs on the manager's volume.
    const config = `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/docker/sandbox-kit-registry\n  delete:\n    enabled: true\nhttp:\n  addr: :${REGISTRY_PORT}\n`;
    await this.sh(["exec", manager!.container, "sh", "-c", `printf "%s" "$1" > ${REGISTRY_CONFIG}`, "sh", config]);
    await this.sh(["exec", "--detach", manager!.container, "docker-registry", "serve", REGISTRY_CONFIG]);
    await this.waitRegistry(manager!.address);
    const info = { name: this.name, network, nodes, dockerHost: managerHost, registry: `${manager!.address}:${REGISTRY_PORT}` };
    this.log(`cluster ${this.name} is up: ${nodes.map((n) => `${n.name} ${n.address}`).join(", ")}`);
    return info;
  }

  private async waitEngine(node: ClusterNode, timeoutMs = 90_000): Promise<void> {
    const host = `tcp://${node.address}:${ENGINE_PORT}`;
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      const ran = await runDocker(this.docker, ["info", "--format", "{{.ServerVersion}}"], { ...process.env, DOCKER_HOST: host }, 10_000);
      if (ran.code === 0 && ran.stdout.trim()) return;
      last = ran.stderr.trim().split("\n").pop() ?? "";
      const state = await runDocker(this.docker, ["inspect", "--format", "{{.State.Status}}", node.container]);
      if (state.stdout.trim() !== "running") {
        const logs = await runDocker(this.docker, ["logs", "--tail", "5", node.container]);
        throw new Error(`node ${node.name}'s dockerd exited: ${`${logs.stdout}${logs.stderr}`.trim().split("\n").slice(-3).join(" | ")}`);
      }
      await sleep(500);
    }
    throw new Error(`node ${node.name}'s dockerd did not answer at ${host}: ${last}`);
  }

  private async waitRegistry(address: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const ok = await fetch(`http://${address}:${REGISTRY_PORT}/v2/`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await sleep(300);
    }
    throw new Error(`the registry on ${address}:${REGISTRY_PORT} did not answer`);
  }

  /** The nodes as the host's daemon and the manager see them. */
  async status(): Promise<ClusterInfo> {
    const ids = await this.ids("container");
    const network = nodeName(this.name, "net");
    const nodes: ClusterNode[] = [];
    for (const id of ids) {
      const line = await this.sh([
        "inspect",
        "--format",
        `{{.Name}} {{index .Config.Labels "${CLUSTER_LABEL}.role"}} {{.State.Status}} {{with index .NetworkSettings.Networks "${network}"}}{{.IPAddress}}{{end}}`,
        id,
      ]);
      const [name = "", role = "worker", state = "", address = ""] = line.replace(/^\//, "").split(" ");
      nodes.push({ name, role: role === "manager" ? "manager" : "worker", container: id, state, address });
    }
    nodes.sort((a, b) => (a.role === b.role ? a.name.localeCompare(b.name) : a.role === "manager" ? -1 : 1));
    const manager = nodes.find((n) => n.role === "manager" && n.state === "running");
    if (!manager) return { name: this.name, nodes };
    const dockerHost = `tcp://${manager.address}:${ENGINE_PORT}`;
    const swarm = await runDocker(this.docker, ["node", "ls", "--format", "{{.Hostname}} {{.Status}}"], { ...process.env, DOCKER_HOST: dockerHost }, 15_000);
    for (const line of swarm.stdout.split("\n")) {
      const [host, status] = line.trim().split(" ");
      const n = nodes.find((x) => x.name === host);
      if (n && status) n.swarm = status.toLowerCase();
    }
    return { name: this.name, network, nodes, dockerHost, registry: `${manager.address}:${REGISTRY_PORT}` };
  }

  /** Removes every node, volume and network of the cluster, by id; resolves with what was removed. */
  async down(): Promise<{ containers: string[]; volumes: string[]; networks: string[] }> {
    const containers = await this.ids("container");
    if (containers.length > 0) await this.sh(["rm", "--force", "--volumes", ...containers], undefined, 180_000);
    const volumes = await this.ids("volume");
    if (volumes.length > 0) await this.sh(["volume", "rm", "--force", ...volumes]);
    const networks = await this.ids("network");
    if (networks.length > 0) await this.sh(["network", "rm", ...networks]);
    return { containers, volumes, networks };
  }
}
