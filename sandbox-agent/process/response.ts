import type { ProcessOutput, ProcessRecord } from "./manager.js";

/** Output inlined by GET /process and GET /process/{id}: the reference keeps the last 64 KiB per stream there. */
export const INLINE_OUTPUT_BYTES = 64 * 1024;

/**
 * Output inlined per list entry of GET /process: a short tail. 1,000
 * processes with 64 KiB each made a 263 MB reply, and NUL bytes (escaped
 * six-fold in JSON) past V8's longest string a 500; the whole
 * output is one GET /process/{id} or /logs away.
 */
export const LIST_OUTPUT_BYTES = 1024;

/**
 * The wire shape @blaxel/core's ProcessResponse expects (reference §4.3),
 * plus `error` and `timeout`. Deliberate differences from the reference:
 * timestamps are RFC 3339 UTC (the reference prints local time labelled
 * "GMT"), and `completedAt` is null while running everywhere (the reference
 * sends "" from some routes and null from others).
 */
export function toProcessResponse(p: ProcessRecord & Partial<ProcessOutput>) {
  return {
    pid: p.pid,
    name: p.name,
    command: p.command,
    status: p.status,
    // Reference values: 0 while running, -1 when ended by a signal or unknown.
    exitCode: p.exitCode ?? (p.status === "running" ? 0 : -1),
    error: p.error,
    startedAt: p.startedAt,
    completedAt: p.completedAt,
    workingDir: p.workingDir,
    keepAlive: p.keepAlive,
    timeout: p.timeout,
    logs: p.logs ?? null,
    stdout: p.stdout ?? null,
    stderr: p.stderr ?? null,
    restartOnFailure: p.restartOnFailure,
    maxRestarts: p.maxRestarts,
    restartCount: p.restartCount,
    stdin: p.stdin,
  };
}
