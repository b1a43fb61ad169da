import { execFile } from "node:child_process";

export interface RunResult {
  /** Exit status, or null when killed by a signal. */
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the program could not be started at all (ENOENT, EACCES). */
  spawnError?: NodeJS.ErrnoException;
}

/**
 * Runs a program with an argv array — never through a shell, so no value
 * (a drive name, a path) can become shell syntax — and reports how it ended
 * instead of throwing.
 */
export function run(argv: readonly string[], timeoutMs = 30_000): Promise<RunResult> {
  const [file, ...args] = argv;
  return new Promise((resolve) => {
    execFile(file!, args, { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: unknown }) | null;
      if (e && typeof e.code === "string") {
        resolve({ code: null, stdout: String(stdout), stderr: String(stderr), spawnError: e });
        return;
      }
      resolve({ code: e ? (typeof e.code === "number" ? e.code : null) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** The last line(s) of a program's output, for an error message. */
export function outputTail(result: Pick<RunResult, "stdout" | "stderr">, max = 300): string {
  const text = `${result.stderr.trim()}\n${result.stdout.trim()}`.trim();
  return text.length > max ? `…${text.slice(-max)}` : text;
}

export function describeExit(result: RunResult): string {
  if (result.spawnError) return `could not start: ${result.spawnError.message}`;
  return result.code === null ? "was killed" : `exited with status ${result.code}`;
}
