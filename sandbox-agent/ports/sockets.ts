import { existsSync, promises as fsp } from "node:fs";
import { connect } from "node:net";

/** One socket of a process tree: the reference's `PortInfo` (§9.9). */
export interface PortInfo {
  /** The pid owning the socket (a child of the asked pid, maybe). */
  pid: number;
  protocol: "tcp" | "udp";
  localAddr: string;
  localPort: number;
  remoteAddr: string;
  remotePort: number;
  /** `ss`'s words: LISTEN, ESTAB, UNCONN, TIME-WAIT, ... */
  state: string;
  processName: string;
}

/** Kernel TCP states (include/net/tcp_states.h) in `ss`'s spelling; UDP sockets show 07 (CLOSE) when unconnected. */
const TCP_STATES: Record<string, string> = {
  "01": "ESTAB",
  "02": "SYN-SENT",
  "03": "SYN-RECV",
  "04": "FIN-WAIT-1",
  "05": "FIN-WAIT-2",
  "06": "TIME-WAIT",
  "07": "UNCONN",
  "08": "CLOSE-WAIT",
  "09": "LAST-ACK",
  "0A": "LISTEN",
  "0B": "CLOSING",
};
const TABLES = [
  ["tcp", "tcp"],
  ["tcp6", "tcp"],
  ["udp", "udp"],
  ["udp6", "udp"],
] as const;

/** A row of /proc/net/{tcp,udp}[6]: a socket, not yet tied to a process. */
type SocketRow = Omit<PortInfo, "pid" | "processName"> & { inode: string };

/**
 * Every pid of the tree rooted at `root`: its descendants (as the reference's
 * `pgrep -P`, recursively) plus the members of its process group, which keeps
 * a server that `sh -c 'server &'` left behind (reparented to init) in view.
 */
export async function processTree(root: number): Promise<number[]> {
  const entries = await fsp.readdir("/proc").catch(() => [] as string[]);
  const children = new Map<number, number[]>();
  const tree = new Set<number>([root]);
  await Promise.all(
    entries
      .filter((e) => /^\d+$/.test(e))
      .map(async (e) => {
        const stat = await fsp.readFile(`/proc/${e}/stat`, "utf8").catch(() => "");
        if (!stat) return;
        // Fields after the command name (which may hold spaces and parentheses): state ppid pgrp ...
        const [, ppid, pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        const pid = Number(e);
        if (Number(pgrp) === root) tree.add(pid);
        const list = children.get(Number(ppid)) ?? [];
        list.push(pid);
        children.set(Number(ppid), list);
      }),
  );
  const stack = [...tree];
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      if (!tree.has(child)) {
        tree.add(child);
        stack.push(child);
      }
    }
  }
  return [...tree];
}

/** Socket inodes held open by `pid` (its /proc/<pid>/fd links `socket:[N]`). */
async function socketInodes(pid: number): Promise<string[]> {
  const fds = await fsp.readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  const links = await Promise.all(fds.map((fd) => fsp.readlink(`/proc/${pid}/fd/${fd}`).catch(() => "")));
  return links.flatMap((l) => (l.startsWith("socket:[") ? [l.slice(8, -1)] : []));
}

/** `0100007F:1F90` → 127.0.0.1, 8080; IPv6 as four little-endian 32-bit words. */
export function decodeAddress(hex: string): { addr: string; port: number } {
  const [host = "", port = "0"] = hex.split(":");
  const bytes: number[] = [];
  for (let word = 0; word < host.length; word += 8) {
    const chunk = host.slice(word, word + 8);
    for (let b = 6; b >= 0; b -= 2) bytes.push(parseInt(chunk.slice(b, b + 2), 16));
  }
  return { addr: bytes.length === 4 ? bytes.join(".") : formatIpv6(bytes), port: parseInt(port, 16) };
}

function formatIpv6(bytes: number[]): string {
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return `::ffff:${bytes.slice(12).join(".")}`;
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // Compress the longest run of zero groups, as inet_ntop does.
  let best = [-1, 0];
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > best[1]!) best = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  if (best[1]! < 2) return groups.join(":");
  return `${groups.slice(0, best[0]).join(":")}::${groups.slice(best[0]! + best[1]!).join(":")}`;
}

/**
 * The kernel's socket tables of a network namespace: that of `netPid` (/proc/<pid>/net, a process of the
 * sandbox: what an agent host serving the sandbox from outside must read), else the agent's own.
 */
export async function socketTable(netPid?: number): Promise<SocketRow[]> {
  const rows: SocketRow[] = [];
  const dir = netPid === undefined ? "/proc/net" : `/proc/${netPid}/net`;
  for (const [file, protocol] of TABLES) {
    const text = await fsp.readFile(`${dir}/${file}`, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const local = decodeAddress(f[1]!);
      const remote = decodeAddress(f[2]!);
      rows.push({
        protocol,
        localAddr: local.addr,
        localPort: local.port,
        remoteAddr: remote.addr,
        remotePort: remote.port,
        state: TCP_STATES[f[3]!] ?? f[3]!,
        inode: f[9]!,
      });
    }
  }
  return rows;
}

/** Every socket of the tree rooted at `root` (any state, loopback included). */
export async function socketsOfTree(root: number): Promise<PortInfo[]> {
  const pids = await processTree(root);
  const owner = new Map<string, number>();
  await Promise.all(
    pids.map(async (pid) => {
      for (const inode of await socketInodes(pid)) if (!owner.has(inode)) owner.set(inode, pid);
    }),
  );
  if (owner.size === 0) return [];
  const names = new Map<number, string>();
  const sockets: PortInfo[] = [];
  // The tables of the namespace the tree's sockets live in (one of its processes holds them), wherever this agent runs.
  for (const row of await socketTable(owner.values().next().value)) {
    const pid = owner.get(row.inode);
    if (pid === undefined || row.inode === "0") continue;
    if (!names.has(pid)) names.set(pid, (await fsp.readFile(`/proc/${pid}/comm`, "utf8").catch(() => "")).trim());
    const { inode: _inode, ...rest } = row;
    sockets.push({ pid, ...rest, processName: names.get(pid)! });
  }
  return sockets;
}

/** The reference's listing: one entry per protocol and local port, a listener winning over other states. */
export async function portsOfTree(root: number): Promise<PortInfo[]> {
  const byPort = new Map<string, PortInfo>();
  for (const socket of await socketsOfTree(root)) {
    const key = `${socket.protocol}/${socket.localPort}`;
    const seen = byPort.get(key);
    if (seen && (seen.state === "LISTEN" || socket.state !== "LISTEN")) continue;
    byPort.set(key, socket);
  }
  return [...byPort.values()];
}

/** Loopback addresses do not count as serving (reference §9.6): only 0.0.0.0, ::, or a real address. */
export function isRoutable(addr: string): boolean {
  return !/^127\./.test(addr) && addr !== "::1" && !/^::ffff:127\./.test(addr);
}

/** Whether the kernel's socket tables can be read here (Linux with /proc). */
const HAS_SOCKET_TABLES = existsSync("/proc/net/tcp");

/** Without socket tables (no /proc), the reference accepts a TCP connect to 127.0.0.1:<port>. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, timeout: 1_000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket
      .once("connect", () => done(true))
      .once("error", () => done(false))
      .once("timeout", () => done(false));
  });
}

/** The ports among `wanted` that the tree serves: TCP listeners or UDP sockets, on a routable address. */
export async function servedPorts(root: number, wanted: readonly number[]): Promise<Set<number>> {
  const served = new Set<number>();
  if (!HAS_SOCKET_TABLES) {
    for (const port of wanted) if (await accepts(port)) served.add(port);
    return served;
  }
  for (const p of await socketsOfTree(root)) {
    if (!wanted.includes(p.localPort) || !isRoutable(p.localAddr)) continue;
    // A bound TCP socket that does not listen also shows 07 (UNCONN): only a UDP one serves that way.
    if (p.state === "LISTEN" || (p.protocol === "udp" && p.state === "UNCONN")) served.add(p.localPort);
  }
  return served;
}
