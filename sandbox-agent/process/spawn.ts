import { spawn, type ChildProcess } from "node:child_process";
import { closeSync } from "node:fs";
import type { LogFiles } from "./output.js";

/**
 * The shell commands run with, as the reference daemon does: `$SHELL
 * $SHELL_ARGS <command>` from the sandbox's environment, `/bin/sh -c` when
 * SHELL is unset (SHELL_ARGS split on whitespace, default `-c`).
 */
export function shellFor(env: NodeJS.ProcessEnv): { file: string; args: string[] } {
  const file = env.SHELL?.trim() || "/bin/sh";
  const args = env.SHELL_ARGS?.trim() ? env.SHELL_ARGS.trim().split(/\s+/) : ["-c"];
  return { file, args };
}

export interface SpawnSpec {
  /** Argv prefix every command starts through (ProcessManagerOptions.wrapper). */
  wrapper?: readonly string[];
  command: string;
  /** Host directory. */
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdin: boolean;
}

/**
 * Spawns a command in its own process group (stop, kill and the kill timer
 * reach everything it starts), its output appended to `files`. Resolves once
 * it runs; rejects with the OS error when it could not start.
 */
export async function spawnInGroup(spec: SpawnSpec, files: LogFiles): Promise<ChildProcess> {
  const fds = files.openForChild();
  const shell = shellFor(spec.env);
  let child: ChildProcess;
  try {
    // The wrapper (e.g. setpriv dropping every capability) goes in front of the shell.
    const [file, ...args] = [...(spec.wrapper ?? []), shell.file, ...shell.args, spec.command];
    child = spawn(file!, args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: [spec.stdin ? "pipe" : "ignore", fds.stdout, fds.stderr],
    });
  } finally {
    closeSync(fds.stdout);
    closeSync(fds.stderr);
  }
  if (child.pid === undefined) throw await new Promise<Error>((resolve) => child.once("error", resolve));
  child.unref();
  return child;
}
