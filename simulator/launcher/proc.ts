import { readdirSync, readFileSync, readlinkSync } from "node:fs";

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

/** The process's state letter (R, S, D, T stopped, t traced, Z...), undefined once it is gone. */
export function stateOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/**
 * SIGSTOP to `root` and every descendant, from outside the sandbox: a process forked meanwhile is found by
 * the next pass (its parent, stopped, forks no more). Resolves once every one of them reads stopped (a
 * signal is delivered asynchronously) or is gone; rejects after `timeoutMs` naming one still running. The
 * default is generous: no request waits on a freeze, and on a loaded machine a process in the middle of an
 * exec or of disk I/O can take seconds to be scheduled and stop.
 *
 * One wait never ends by itself: a parent in vfork() (dash runs its commands so, as does posix_spawn) sleeps
 * uninterruptibly (state D) until its child has exec'd, and a SIGSTOP that caught the child before its exec
 * holds the parent there for good. A process that stays in D has its stopped children let go (SIGCONT) until
 * it stops; the next round stops them again, past their exec.
 */
export async function stopTree(root: number, timeoutMs = 10_000, members: (root: number) => number[] = treeOf): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  const stopped = new Set<number>();
  for (;;) {
    signalTree(root, stopped, "SIGSTOP", members);
    const released = await waitUntilStopped(stopped, deadline);
    if (released.length === 0) return [...stopped];
    for (const pid of released) stopped.delete(pid);
  }
}

const treeOf = (root: number) => [root, ...descendantsOf(root)];

/**
 * Every process in the PID namespace `pid1` is the init of (compared by the namespace's inode, as the host sees
 * it): a sandbox an agent host serves runs its commands under helpers outside it, so they are no descendants of
 * its init.
 */
export function pidNamespaceMembers(pid1: number): number[] {
  let ns: string;
  try {
    ns = readlinkSync(`/proc/${pid1}/ns/pid`);
  } catch {
    return [];
  }
  const members: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === ns) members.push(Number(entry));
    } catch {
      // Gone, or not ours to look at (then not in a sandbox of ours either).
    }
  }
  return members;
}

/** Sends `sig` to `root` and its descendants not yet in `done`, pass after pass until a pass finds none new. */
function signalTree(root: number, done: Set<number>, sig: NodeJS.Signals, members: (root: number) => number[] = treeOf): void {
  for (let pass = 0; pass < 20; pass++) {
    const pids = members(root).filter((p) => !done.has(p));
    if (pids.length === 0) break;
    for (const pid of pids) {
      signal(pid, sig);
      done.add(pid);
    }
  }
}

/** A D state lasting this long is taken for a vfork() parent waiting on a stopped child, not for disk I/O. */
const VFORK_WAIT_MS = 50;

/** Waits until every pid reads stopped or is gone; returns the children it let go to free a vfork() parent. */
async function waitUntilStopped(pids: Set<number>, deadline: number): Promise<number[]> {
  const released: number[] = [];
  for (const pid of pids) {
    if (released.includes(pid)) continue; // let go above: the next round stops it again
    let inD: number | undefined;
    for (;;) {
      const state = stateOf(pid);
      if (state === undefined || state === "T" || state === "t" || state === "Z" || state === "X") break;
      if (Date.now() > deadline) throw new Error(`process ${pid} of the sandbox did not stop (state ${state})`);
      inD = state === "D" ? (inD ?? Date.now()) : undefined;
      if (inD !== undefined && Date.now() - inD >= VFORK_WAIT_MS) {
        for (const child of childrenOf(pid))
          if (stateOf(child) === "T") {
            signal(child, "SIGCONT");
            released.push(child);
          }
        inD = Date.now();
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
  return released;
}

function childrenOf(pid: number): number[] {
  return readdirSync("/proc").flatMap((entry) => (/^\d+$/.test(entry) && parentOf(Number(entry)) === pid ? [Number(entry)] : []));
}

/** SIGCONT to `root` and every descendant (stopped processes fork nothing: one pass finds them all). */
export function continueTree(root: number): void {
  for (const pid of [root, ...descendantsOf(root)]) signal(pid, "SIGCONT");
}

/**
 * SIGKILL to `root` and every descendant. A SIGKILL to the root alone leaves its children running, reparented
 * away where no /proc walk from the root finds them: bwrap's --die-with-parent binds its namespace's init to the
 * outer bwrap only once that init has finished setting up (before then, killed outer bwrap leaves the init
 * waiting for it forever). So the tree is held first (SIGSTOP: a process with a signal pending forks no more, so
 * the walk is complete once a pass finds nothing new), then killed; returns the pids signalled.
 */
export function killTree(root: number): number[] {
  const held = new Set<number>();
  signalTree(root, held, "SIGSTOP");
  for (const pid of held) signal(pid, "SIGKILL");
  return [...held];
}
