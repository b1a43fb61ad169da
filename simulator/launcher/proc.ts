import { readdirSync, readFileSync } from "node:fs";

/** Reads /proc to find processes; Linux only, like the agent itself. */

export function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses: fields resume after the last ") ".
    return Number(stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

export function cmdlineOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

/** Every live descendant of `pid`, parents before children. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = parentOf(Number(entry));
    if (ppid === undefined) continue;
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const out: number[] = [];
  const queue = [...(children.get(pid) ?? [])];
  while (queue.length > 0) {
    const next = queue.shift()!;
    out.push(next);
    queue.push(...(children.get(next) ?? []));
  }
  return out;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone: nothing to signal.
  }
}

/** When the process started (clock ticks since boot): with the pid, it names one process for good. */
export function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * Proportional set size of processes and all their descendants, in bytes (smaps_rollup: each shared page counted
 * once across the processes sharing it, so a sum is what they cost the machine, unlike a sum of RSS).
 */
export function treePssBytes(pids: number[]): number {
  let kib = 0;
  for (const pid of new Set(pids.flatMap((p) => [p, ...descendantsOf(p)]))) {
    try {
      kib += Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return kib * 1024;
}
