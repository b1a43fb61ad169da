import { readFileSync, writeFileSync } from "node:fs";

/**
 * Signals a process group (every process the command started, as the
 * reference daemon does with `-pid`), falling back to the single pid when the
 * group is gone. False when nothing received it.
 */
export function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return true;
    } catch {
      // ESRCH: try the next target; EPERM cannot happen for our own children.
    }
  }
  return false;
}

/** Whether any process is left in the group led by `pid` (the leader itself may be gone). */
export function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether the pid runs. A zombie (exited, not yet reaped: an init that does not reap, in containers) counts as ended. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return procState(pid) !== "Z";
}

function procState(pid: number): string | null {
  return procStatFields(pid)?.[0] ?? null;
}

/** Fields 3.. of /proc/<pid>/stat, or null where there is no /proc. */
function procStatFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses: split after the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/**
 * The kernel's start time of a pid (field 22 of /proc/<pid>/stat, clock ticks
 * since boot): with the pid it identifies a process for good, so a pid reused
 * after an agent restart is not mistaken for ours. Null where there is no /proc.
 */
export function processStartTime(pid: number): string | null {
  return procStatFields(pid)?.[19] ?? null;
}

/** Whether `pid` is still the process that was started with `startTime` (when known). */
export function isSameProcessAlive(pid: number, startTime: string | null): boolean {
  if (!isAlive(pid)) return false;
  if (startTime === null) return true;
  const now = processStartTime(pid);
  return now === null || now === startTime;
}

/**
 * The `oom_kill N` counter of a cgroup file (v2 memory.events, v1
 * memory.oom_control) the launcher mounts into the sandbox; undefined when
 * the file cannot be read.
 */
export function readOomKills(file: string): number | undefined {
  try {
    const match = /^oom_kill (\d+)$/m.exec(readFileSync(file, "utf8"));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Makes the process (and what it starts) the OOM killer's first choice over the agent. */
export function preferOomVictim(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, "500");
  } catch {
    // Gone already, or /proc is read-only: the kernel then picks by size alone.
  }
}
