import { spawn } from "node:child_process";

export interface RunResult {
  /** Exit status, or null when killed by a signal. */
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the program could not be started at all (ENOENT, EACCES). */
  spawnError?: NodeJS.ErrnoException;
}

export interface RunOptions {
  timeoutMs?: number;
  /**
   * Descriptors the program gets as its fds 3, 4, ...: a pinned directory is
   * handed over this way and named `/proc/self/fd/3` in argv (execFile cannot
   * pass descriptors).
   */
  fds?: readonly number[];
}

/**
 * The argv prefixes that run mount(8) and umount(8). By default the ones on
 * PATH; an isolated sandbox's launcher gives the agent its own (util-linux
 * from the sandbox kit, through the kit's loader) so drives never depend on
 * the user's image having them.
 */
export interface MountPrograms {
  mount: readonly string[];
  umount: readonly string[];
}

export const PATH_MOUNT_PROGRAMS: MountPrograms = { mount: ["mount"], umount: ["umount"] };

/** Output kept per stream: enough for an error message. */
const MAX_OUTPUT = 64 * 1024;

/**
 * Runs a program with an argv array — never through a shell, so no value
 * (a drive name, a path) can become shell syntax — and reports how it ended
 * instead of throwing.
 */
export function run(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const [file, ...args] = argv;
  return new Promise((resolve) => {
    const child = spawn(file!, args, { stdio: ["ignore", "pipe", "pipe", ...(options.fds ?? [])] });
    const out = { stdout: "", stderr: "" };
    for (const name of ["stdout", "stderr"] as const) {
      child[name]!.setEncoding("utf8").on("data", (d: string) => {
        if (out[name].length < MAX_OUTPUT) out[name] += d;
      });
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000);
    child.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ code: null, ...out, spawnError: err });
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, ...out });
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

/** The mount is in use (EBUSY); the reason is the unmount program's own words (pinned-mount.ts and the backends throw it). */
export class DriveBusyError extends Error {}
