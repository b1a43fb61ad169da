import { execFile } from "node:child_process";
import { join } from "node:path";
import { createServer, type Server } from "node:net";
import type { SandboxEgressSpec } from "./gateway.js";
import { writeTrustFiles } from "./egress-trust.js";
import { SANDBOX_CA_BUNDLE } from "./sandbox-setup.js";
import { LaunchError } from "./types.js";

/**
 * A docker sandbox's network (docs/launchers.md, docker): its container sits
 * on a network of its own, created `--internal` (docker forwards nothing
 * from it: no internet, no other container), where the simulator reaches the
 * agent at the container's address and listens on the network's gateway
 * address for the sandbox's egress. Inside, the agent relays the simulator's
 * own address (127.0.0.1:<port>, as the URLs users get name it) to that
 * listener (--egress-relay), which accepts only the container's address, so
 * every connection on it is this sandbox's. The default `bridge` network is
 * attached beside it while the sandbox may go out directly, and detached
 * while its policy restricts destinations: the egress proxy is then the
 * only way out, as under bwrap with slirp4netns detached.
 */

export type DockerRun = (args: string[]) => Promise<{ code: number | null; stdout: string; stderr: string }>;

/** The network every sandbox's container joins for its direct outbound path. */
export const OUTBOUND_NETWORK = "bridge";

export interface SandboxNetwork {
  name: string;
  /** The host's address on it: where the egress listener is. */
  gateway: string;
  /** Its bridge interface on the host (`br-<id>`). */
  bridge: string;
}

export async function createSandboxNetwork(run: DockerRun, name: string, labels: string[]): Promise<SandboxNetwork> {
  const created = await run(["network", "create", "--internal", ...labels.flatMap((l) => ["--label", l]), name]);
  if (created.code !== 0) throw new LaunchError(`docker network create ${name} failed: ${created.stderr.trim().slice(-300)}`);
  const inspected = await run(["network", "inspect", "--format", "{{.Id}} {{range .IPAM.Config}}{{.Gateway}} {{end}}", name]);
  const [id, ...addresses] = inspected.stdout.trim().split(/\s+/);
  const gateway = addresses.find((a) => /^\d+\.\d+\.\d+\.\d+$/.test(a));
  if (!gateway) {
    await run(["network", "rm", name]);
    throw new LaunchError(`docker network ${name} has no IPv4 gateway: ${inspected.stderr.trim() || inspected.stdout.trim()}`);
  }
  return { name, gateway, bridge: `br-${id!.slice(0, 12)}` };
}

export async function containerAddress(run: DockerRun, container: string, network: string): Promise<string> {
  const inspected = await run(["inspect", "--format", `{{(index .NetworkSettings.Networks "${network}").IPAddress}}`, container]);
  const address = inspected.stdout.trim();
  if (inspected.code !== 0 || !/^\d+\.\d+\.\d+\.\d+$/.test(address))
    throw new LaunchError(`container ${container} has no address on ${network}: ${inspected.stderr.trim() || address}`);
  return address;
}

/** Attaches or detaches the sandbox's direct outbound path (the default bridge); idempotent. */
export async function setOutbound(run: DockerRun, container: string, on: boolean): Promise<void> {
  const done = await run(["network", on ? "connect" : "disconnect", ...(on ? [] : ["--force"]), OUTBOUND_NETWORK, container]);
  const already = /already exists|is not connected|not connected to/i.test(done.stderr);
  if (done.code !== 0 && !already)
    throw new LaunchError(`docker network ${on ? "connect" : "disconnect"} ${OUTBOUND_NETWORK} ${container}: ${done.stderr.trim().slice(-300)}`);
}

/**
 * The sandbox's egress listener on its network's gateway address: connections
 * from the container's address (set once known) go to `egress.accept`; any
 * other source (a container of another network reaching the host's address)
 * is closed unread.
 */
export async function openEgressListener(gateway: string, egress: SandboxEgressSpec): Promise<{ server: Server; port: number; allow(address: string): void }> {
  let allowed: string | undefined;
  const server = createServer((socket) => {
    const from = socket.remoteAddress?.replace(/^::ffff:/, "");
    if (!allowed || from !== allowed) return void socket.destroy();
    egress.accept(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: gateway, port: 0 }, () => resolve());
  });
  server.on("error", () => server.close());
  const port = (server.address() as { port: number }).port;
  return { server, port, allow: (address) => (allowed = address) };
}

/**
 * The CA files in the agent's data dir (egress-trust.ts), the full bundle made
 * from the host's system store (an image's own cannot be read before it runs);
 * returns that bundle's host path, which the container gets as its system store.
 */
export function writeContainerTrust(dataDir: string, caPem: string): string {
  writeTrustFiles(dataDir, caPem, SANDBOX_CA_BUNDLE);
  return join(dataDir, "etc", "ca-bundle.crt");
}

/**
 * Docker forwards nothing from an internal network, but the container's
 * default route still leads to the host through the network's gateway, so the
 * host's own addresses (its services bound to 0.0.0.0) answer it. Where the
 * simulator runs as root with iptables (as dockerd does), the host's INPUT
 * from the network's bridge is closed but for the sandbox's egress listener
 * and replies to the simulator's own connections (to the agent); `undo`
 * removes the rules. Undefined where it cannot (docs/launchers.md, docker).
 */
export async function closeHostToNetwork(network: SandboxNetwork, egressPort: number): Promise<{ undo(): Promise<void> } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const chain = chainOf(network.bridge);
  const undo = () => openHostToNetwork(network.bridge);
  const rules = [
    ["-N", chain],
    ["-A", chain, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
    ["-A", chain, "-p", "tcp", "-d", network.gateway, "--dport", String(egressPort), "-j", "ACCEPT"],
    ["-A", chain, "-j", "REJECT"],
    ["-I", "INPUT", "-i", network.bridge, "-j", chain],
  ];
  for (const rule of rules) {
    if (!(await iptables(...rule))) {
      await undo();
      return undefined;
    }
  }
  return { undo };
}

/** Removes closeHostToNetwork's rules for a bridge (also those a simulator that died left for a network removed since). */
export async function openHostToNetwork(bridge: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const chain = chainOf(bridge);
  while (await iptables("-D", "INPUT", "-i", bridge, "-j", chain));
  if (await iptables("-F", chain)) await iptables("-X", chain);
}

const chainOf = (bridge: string) => `SBXK-${bridge.replace(/^br-/, "")}`;

function iptables(...args: string[]): Promise<boolean> {
  return new Promise((resolve) => execFile("iptables", ["-w", ...args], { timeout: 10_000 }, (err) => resolve(!err)));
}
