import { readdirSync, readFileSync } from "node:fs";

/** Pids whose session is `sid` (field 6 of /proc/<pid>/stat): every process a terminal's shell started, whatever group job control gave it. */
export function sessionMembers(sid: number, proc = "/proc"): number[] {
  const members: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync(proc);
  } catch {
    return members;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`${proc}/${name}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses, so split after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[3]) === sid) members.push(Number(name));
  }
  return members;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * Ends a terminal: SIGKILL to the shell's process group and to every process
 * of its session, as the reference kills the session it made with setsid.
 * The interactive shell gives each job its own group, so the group alone
 * would leave `sleep 100 &` behind; a process that left the session with
 * setsid of its own is a daemon the user meant to keep. Repeated a few times
 * so a member forking while it dies is caught.
 */
export function killSession(sid: number, proc = "/proc"): void {
  signal(-sid, "SIGKILL");
  for (let round = 0; round < 5; round++) {
    const members = sessionMembers(sid, proc);
    if (members.length === 0) return;
    for (const pid of members) signal(pid, "SIGKILL");
  }
}
