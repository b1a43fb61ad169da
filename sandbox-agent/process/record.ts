import { randomBytes } from "node:crypto";
import { toIso } from "../../src/clock.js";
import type { ProcessRecord } from "./manager.js";
import type { ProcessRow, ProcessStatus } from "./store.js";

/** What an exit means when nobody asked for it (stop, kill and timeout set their own status). */
export function exitMeaning(code: number | null, signal: NodeJS.Signals | null, adopted: boolean): { status: ProcessStatus; error: string | null } {
  if (adopted) return { status: "failed", error: "agent restarted while the process ran: its exit status is unknown" };
  if (code === 0) return { status: "completed", error: null };
  if (code !== null) return { status: "failed", error: `exited with code ${code}` };
  return { status: "failed", error: `terminated by signal ${signal ?? "unknown"}` };
}

export function toRecord(row: ProcessRow): ProcessRecord {
  return {
    pid: String(row.pid),
    name: row.name,
    command: row.command,
    status: row.status,
    exitCode: row.exitCode,
    error: row.error,
    startedAt: toIso(row.startedAt),
    completedAt: row.completedAt === null ? null : toIso(row.completedAt),
    workingDir: row.workingDir,
    keepAlive: row.keepAlive,
    timeout: row.timeout,
    killAfter: row.killAfter,
    restartOnFailure: row.restartOnFailure,
    maxRestarts: row.maxRestarts,
    restartCount: row.restartCount,
    stdin: row.stdin,
  };
}

/** Reference default names: `proc-` + 8 characters from [a-z0-9]. */
export function randomName(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(8)].map((b) => alphabet[b % alphabet.length]).join("");
}
