import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, closeSync, constants, statSync } from "node:fs";
import { join } from "node:path";
import type { LogFiles } from "./output.js";

/**
 * The shell commands run with, exactly as the reference daemon picks it
 * (handler/process/process.go StartProcessWithName): the agent's own `SHELL`
 * (its environment, never a request's `env`), `sh` when unset or empty; its
 * `SHELL_ARGS` split on whitespace (Go's strings.Fields: only blanks gives no
 * argument at all), `-c` when unset or empty; then the command. A name without
 * a slash is looked up on the agent's PATH, as Go's exec.Command does.
 */
export function shellFor(agentEnv: NodeJS.ProcessEnv): { file: string; args: string[] } {
  const shell = agentEnv.SHELL ?? "";
  const shellArgs = agentEnv.SHELL_ARGS ?? "";
  const args = shellArgs === "" ? ["-c"] : shellArgs.split(/\s+/).filter((a) => a !== "");
  return { file: onPath(shell === "" ? "sh" : shell, agentEnv.PATH), args };
}

/** A program name resolved on PATH (an executable file), or the name as given (its spawn then fails with ENOENT). */
function onPath(name: string, path: string | undefined): string {
  if (name.includes("/")) return name;
  for (const dir of (path ?? "").split(":")) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return name;
}

export interface SpawnSpec {
  /** Argv prefix every command starts through (ProcessManagerOptions.wrapper). */
  wrapper?: readonly string[];
  command: string;
  /** Host directory. */
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The shell and its arguments (shellFor of the agent's environment). */
  shell: { file: string; args: string[] };
  stdin: boolean;
}

/**
 * Spawns a command in its own process group (stop, kill and the kill timer
 * reach everything it starts), its output appended to `files`. Resolves once
 * it runs; rejects with the OS error when it could not start.
 */
export async function spawnInGroup(spec: SpawnSpec, files: LogFiles): Promise<ChildProcess> {
  const fds = files.openForChild();
  const shell = spec.shell;
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
