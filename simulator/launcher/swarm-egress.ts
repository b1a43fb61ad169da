import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import type { Socket } from "node:net";
import { join } from "node:path";
import { EGRESS_TUNNEL_PATH, EGRESS_TUNNEL_PROTOCOL } from "../../src/egress-tunnel.js";
import { writeContainerTrust } from "./docker-network.js";
import type { SandboxEgressSpec } from "./gateway.js";
import { hostsFile } from "./sandbox-setup.js";
import type { NodeEngines } from "./swarm-nodes.js";
import { LaunchError, type LaunchSpec } from "./types.js";

/**
 * A swarm sandbox's network (docs/launchers.md, swarm): the simulator's egress reaches it over tunnels the
 * simulator opens to its agent (sandbox-agent/ports/egress-tunnel.ts), since a task on another node has no route
 * to the simulator's host that identifies it (its node's NAT) while the simulator always reaches the agent.
 * Inside, the agent listens on the simulator's address; each connection there takes an idle tunnel and is
 * handed to the egress proxy tagged with the sandbox, so sandbox URLs, previews, `BL_API_URL`, the proxy's
 * routing and secret injection all work from any node. The direct outbound path (the node's docker_gwbridge)
 * is cut while the sandbox's policy restricts destinations by rules in the task's own network namespace, set by
 * a short-lived container of its node's engine sharing that namespace (the node's own chroot and iptables, its
 * root mounted read-only): only the agent's replies and loopback leave then.
 */

/** The agent's files for the sandbox's egress: the trust bundle (its system store) and /etc/hosts, kept current. */
export interface SwarmEgressFiles {
  tunnelPort: number;
  caBundle: string;
  hostsFile: string;
  stopHosts(): void;
}

export function writeSwarmEgressFiles(spec: LaunchSpec, egress: SandboxEgressSpec): SwarmEgressFiles {
  const etc = join(spec.dataDir, "etc");
  mkdirSync(etc, { recursive: true });
  const hostsPath = join(etc, "hosts");
  writeFileSync(hostsPath, hostsFile(spec.sandbox, egress.hosts));
  const stop = egress.watchHosts?.((names) => writeFileSync(hostsPath, hostsFile(spec.sandbox, names)));
  return { tunnelPort: egress.listen[0]!.port, caBundle: writeContainerTrust(spec.dataDir, egress.caPem), hostsFile: hostsPath, stopHosts: () => stop?.() };
}

/** Idle tunnels kept open per sandbox: a burst of connections takes them, each replaced at once. */
const IDLE_TUNNELS = 2;

/**
 * Keeps IDLE_TUNNELS tunnels open to the agent at `url` until `close`; each one a sandbox's connection takes is
 * handed to `accept` and replaced. A tunnel that cannot be opened (the agent restarting, its node busy) is tried
 * again after a backoff of 200 ms doubling to 5 s.
 */
export function keepEgressTunnels(url: string, token: string, accept: (socket: Socket) => void): { close(): void } {
  const target = new URL(url);
  const open = new Set<Socket>();
  let opening = 0;
  let closed = false;
  let backoffMs = 200;
  let retry: NodeJS.Timeout | undefined;

  const refill = () => {
    while (!closed && !retry && opening + open.size < IDLE_TUNNELS) tunnel();
  };
  const failed = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      refill();
    }, backoffMs);
    backoffMs = Math.min(backoffMs * 2, 5_000);
  };
  const tunnel = () => {
    opening++;
    const req = request({
      host: target.hostname,
      port: Number(target.port),
      path: EGRESS_TUNNEL_PATH,
      agent: false,
      headers: { connection: "Upgrade", upgrade: EGRESS_TUNNEL_PROTOCOL, authorization: `Bearer ${token}` },
    });
    req.setTimeout(15_000, () => req.destroy());
    req.on("response", (res) => {
      res.resume();
      opening--;
      failed();
    });
    req.on("error", () => {
      opening--;
      failed();
    });
    req.on("upgrade", (_res, socket: Socket, head: Buffer) => {
      opening--;
      req.setTimeout(0);
      if (closed) return void socket.destroy();
      backoffMs = 200;
      open.add(socket);
      socket.setKeepAlive(true, 30_000);
      let taken = false;
      const take = (chunk: Buffer) => {
        if (taken || chunk.length === 0) return;
        taken = true;
        socket.off("data", take);
        socket.pause();
        open.delete(socket);
        if (chunk.length > 1) socket.unshift(chunk.subarray(1));
        refill();
        accept(socket);
        socket.resume();
      };
      socket.on("error", () => socket.destroy());
      socket.once("close", () => {
        if (taken) return;
        open.delete(socket);
        failed();
      });
      if (head.length > 0) take(head);
      else socket.on("data", take);
    });
    req.end();
  };

  refill();
  return {
    close() {
      closed = true;
      if (retry) clearTimeout(retry);
      for (const socket of open) socket.destroy();
      open.clear();
    },
  };
}

const CHAIN = "SBXK-DIRECT";
/** The rules, for iptables and ip6tables: loopback and the agent's own replies leave, nothing else. */
const cut = (agentPort: number) =>
  `for t in iptables ip6tables; do command -v $t >/dev/null || continue; ` +
  `$t -w -N ${CHAIN} 2>/dev/null || $t -w -F ${CHAIN} || exit 1; ` +
  `$t -w -A ${CHAIN} -o lo -j RETURN && ` +
  `$t -w -A ${CHAIN} -p tcp --sport ${agentPort} -m conntrack --ctstate ESTABLISHED -j RETURN && ` +
  `$t -w -A ${CHAIN} -j REJECT && ` +
  `{ $t -w -C OUTPUT -j ${CHAIN} 2>/dev/null || $t -w -I OUTPUT -j ${CHAIN}; } || exit 1; done`;
const restore = () =>
  `for t in iptables ip6tables; do command -v $t >/dev/null || continue; ` +
  `while $t -w -D OUTPUT -j ${CHAIN} 2>/dev/null; do :; done; $t -w -F ${CHAIN} 2>/dev/null; $t -w -X ${CHAIN} 2>/dev/null; done; true`;

/**
 * Cuts (`on` false) or restores the task's direct outbound path, by rules in its container's network namespace
 * applied through its node's engine: a container of the task's own image sharing that namespace, with
 * NET_ADMIN and the node's root read-only, runs the node's iptables (chroot). Throws where that node's engine
 * cannot be reached or has no iptables: a policy that cannot be enforced is said, not ignored.
 */
export async function setTaskOutbound(engines: NodeEngines, nodeId: string, container: string, agentPort: number, on: boolean): Promise<void> {
  const engine = await engines.of(nodeId);
  if (!engine.env)
    throw new LaunchError(`cannot ${on ? "restore" : "cut"} the sandbox's direct outbound path: the engine of node ${engine.hostname} is not reachable`);
  const image = await engines.runOn(nodeId, ["inspect", "--format", "{{.Image}}", container], 15_000);
  if (image.code !== 0) throw new LaunchError(`the task's container on node ${engine.hostname} is gone: ${image.stderr.trim().slice(-200)}`);
  const args = [
    "run",
    "--rm",
    "--network",
    `container:${container}`,
    "--cap-add",
    "NET_ADMIN",
    "--mount",
    "type=bind,source=/,target=/host,readonly",
    "--label",
    "sandbox-kit.kind=swarm-network-helper",
    // The node's own chroot, run with the image's C library (an image here must be glibc-compatible with its node anyway).
    "--entrypoint",
    "/host/usr/sbin/chroot",
    image.stdout.trim(),
    "/host",
    "/bin/sh",
    "-c",
    on ? restore() : cut(agentPort),
  ];
  const ran = await engines.runOn(nodeId, args, 30_000);
  if (ran.code !== 0)
    throw new LaunchError(
      `cannot ${on ? "restore" : "cut"} the sandbox's direct outbound path on node ${engine.hostname} (iptables in its network namespace): ${ran.stderr.trim().slice(-300)}`,
    );
}
