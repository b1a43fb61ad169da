import { randomBytes } from "node:crypto";
import { readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { toIso } from "../../src/clock.js";
import type { ProcessRecord } from "./types.js";
import type { ProcessRow, ProcessStatus } from "./process-store.js";

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

/** `<log dir>/<id>.exit`: how a command ended, written by the agent an upgrade replaced (it stays its parent). */
function exitRecordPath(logDir: string, id: string): string {
  return join(logDir, `${id}.exit`);
}

export function writeExitRecord(logDir: string, id: string, code: number | null, signal: NodeJS.Signals | null): void {
  const path = exitRecordPath(logDir, id);
  try {
    writeFileSync(`${path}.tmp`, JSON.stringify({ code, signal }));
    renameSync(`${path}.tmp`, path);
  } catch {
    // the data dir is gone (sandbox deleted): nobody is left to read it
  }
}

/** The exit record of an adopted command, removed once read; undefined when there is none. */
export function takeExitRecord(logDir: string, id: string): { code: number | null; signal: NodeJS.Signals | null } | undefined {
  const path = exitRecordPath(logDir, id);
  try {
    const record = JSON.parse(readFileSync(path, "utf8")) as { code: number | null; signal: NodeJS.Signals | null };
    unlinkSync(path);
    return record;
  } catch {
    return undefined;
  }
}
