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
export function shellFor(agentEnv: NodeJS.ProcessEnv, lookHere = true): { file: string; args: string[] } {
  const shell = agentEnv.SHELL ?? "";
  const shellArgs = agentEnv.SHELL_ARGS ?? "";
  const args = shellArgs === "" ? ["-c"] : shellArgs.split(/\s+/).filter((a) => a !== "");
  const name = shell === "" ? "sh" : shell;
  // A command entered into a sandbox from outside (a custom spawner) finds its shell on PATH there, not here.
  return { file: lookHere ? onPath(name, agentEnv.PATH) : name, args };
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
  /** Host directory (a spawner running commands from inside the sandbox's own view uses it). */
  cwd: string;
  /** The same directory as a sandbox path (a spawner entering the sandbox's namespaces uses this one). */
  workingDir: string;
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

/** A command that runs: its exit and stdin through `child`, its identity as the host and the sandbox see it. */
export interface SpawnedRun {
  /** The process whose exit is the command's (the command itself, or a helper mirroring its end). */
  child: ChildProcess;
  /** Host pid of the command, leader of its process group: what signals, liveness and OOM preference go to. */
  pid: number;
  /** The command's pid as the sandbox sees it (the API's `pid`); `pid` where the spawner runs in the sandbox. */
  sandboxPid: number;
}

/** How a command is started: spawnHere (the agent is in the sandbox) or one that enters the sandbox (ns-spawn.ts). */
export type Spawner = (spec: SpawnSpec, files: LogFiles) => Promise<SpawnedRun>;

/** The agent runs inside the sandbox: the command is its own child, its pid the same everywhere. */
export const spawnHere: Spawner = async (spec, files) => {
  const child = await spawnInGroup(spec, files);
  return { child, pid: child.pid!, sandboxPid: child.pid! };
};
