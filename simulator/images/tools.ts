import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { descendantsOf, signal } from "../launcher/proc.js";

/**
 * The external programs an image build runs (mmdebstrap, npm, docker), as
 * child processes with argv only (never a shell): the simulator's event loop
 * keeps serving while an image builds.
 */

export class ToolError extends Error {}

/** Tools running now: a simulator that exits (stop, SIGINT, SIGTERM) ends its builds instead of leaving them behind. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess): void {
  running.add(child);
  child.once("close", () => running.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const c of running) c.kill("SIGTERM");
  });
}

export interface RunOptions extends Pick<SpawnOptions, "cwd" | "env" | "signal"> {
  /** Each line the tool writes (stdout and stderr), e.g. for progress. */
  onLine?: (line: string) => void;
  /** Handles the tool's stdout as a stream instead of lines (an exported tarball). */
  onStdout?: (stdout: Readable) => Promise<void>;
  timeoutMs?: number;
}

/** Runs a tool to completion; rejects with its last output lines when it fails. */
export function runTool(command: string, args: string[], options: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"], timeout: options.timeoutMs });
    track(child);
    // Aborted (the store closes): the tool and everything it started (mmdebstrap's forks, apt, dpkg) get SIGTERM.
    const abort = () => {
      for (const pid of [...descendantsOf(child.pid ?? 0), child.pid ?? 0]) if (pid > 0) signal(pid, "SIGTERM");
    };
    if (options.signal?.aborted) abort();
    options.signal?.addEventListener("abort", abort, { once: true });
    child.once("close", () => options.signal?.removeEventListener("abort", abort));
    const tail: string[] = [];
    let stdout = "";
    const keep = (line: string) => {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      options.onLine?.(line);
    };
    let consumed: Promise<void> = Promise.resolve();
    if (options.onStdout) consumed = options.onStdout(child.stdout);
    else {
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (d: string) => {
        if (stdout.length < 1 << 20) stdout += d;
      });
      createInterface({ input: child.stdout }).on("line", keep);
    }
    createInterface({ input: child.stderr }).on("line", keep);
    let failed: Error | undefined;
    consumed.catch((err: Error) => {
      failed = err;
      child.kill("SIGTERM");
    });
    child.once("error", (err) => reject(new ToolError(`${command}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "not installed" : err.message}`)));
    child.once("close", (code, signal) => {
      void consumed.then(
        () => {
          if (options.signal?.aborted) reject(new ToolError(`${command} ${args[0] ?? ""} stopped: the image store was closed`));
          else if (code === 0) resolve(stdout);
          else
            reject(
              new ToolError(
                `${command} ${args[0] ?? ""} failed (${signal ? `signal ${signal}` : `exit code ${code}`})${tail.length ? `:\n${tail.join("\n")}` : ""}`,
              ),
            );
        },
        () => reject(failed),
      );
    });
  });
}

/** Whether a program is on PATH. */
export async function hasTool(command: string): Promise<boolean> {
  try {
    await runTool("sh", ["-c", `command -v "$0"`, command]);
    return true;
  } catch {
    return false;
  }
}
