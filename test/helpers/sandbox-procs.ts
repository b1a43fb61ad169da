import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { probeIsolation } from "../../simulator/launcher/isolation.js";

/**
 * Finding a sandbox's processes from the host, by pid: /proc is scanned for
 * command lines carrying a test's marker, or for processes in a sandbox's PID
 * namespace. Lifecycle tests assert these lists are empty once the sandbox (or
 * the simulator) is gone.
 */

/** Why isolation tests skip here, or undefined when the isolating launcher can run. */
export const isolationUnavailable = probeIsolation().unavailable;
if (isolationUnavailable) console.warn(`isolation tests skipped: ${isolationUnavailable}`);

function pids(): number[] {
  return readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .map(Number);
}

/** Live (not zombie) processes whose command line contains `marker`, this test process excluded. */
export function pidsWithMarker(marker: string): number[] {
  return pids().filter((pid) => {
    if (pid === process.pid) return false;
    try {
      if (/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"))) return false;
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker);
    } catch {
      return false;
    }
  });
}

/** The PID namespace of a process ("pid:[4026532...]"). */
export function pidNamespaceOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Every process in a PID namespace. */
export function pidsInNamespace(ns: string): number[] {
  return pids().filter((pid) => pidNamespaceOf(pid) === ns);
}

/** A command holding TCP `port` on all interfaces until killed, its command line carrying `marker`. */
export function serverCommand(port: number, marker: string): string {
  const script = `require('http').createServer((q, s) => s.end('up')).listen(${port}, '0.0.0.0') /* ${marker} */`;
  return `exec $(command -v node || echo /opt/sandbox-kit/bin/node) -e "${script}"`;
}

/** Whether the process's network namespace has a TCP socket listening on `port` (/proc/<pid>/net/tcp, tcp6). */
export function listensOn(pid: number, port: number): boolean {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, "0")} `;
  for (const table of ["tcp", "tcp6"]) {
    try {
      const lines = readFileSync(`/proc/${pid}/net/${table}`, "utf8").split("\n").slice(1);
      if (lines.some((l) => l.split(/\s+/)[2]?.endsWith(hex.trim()) && l.split(/\s+/)[4] === "0A")) return true;
    } catch {
      // Gone.
    }
  }
  return false;
}
