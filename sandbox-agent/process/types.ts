import type { Clock } from "../../src/clock.js";
import type { Logger } from "../../src/logging.js";
import type { Db } from "../../src/sqlite.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import type { Spawner } from "./spawn.js";
import type { ProcessStatus } from "./process-store.js";

/** What ProcessManager takes and gives: the contract the routes and the scheduler use. */
export interface StartProcessRequest {
  command: string;
  name?: string;
  /** A sandbox path (confined under --root); default the agent's --working-dir (ProcessManagerOptions.defaultWorkingDir). */
  workingDir?: string;
  /** Merged over the agent's own environment (these win). */
  env?: Record<string, string>;
  /**
   * Seconds the caller's waits are bounded by (recorded on the process; the
   * HTTP route enforces it). It never kills: see killAfter (reference §4.2).
   */
  timeout?: number;
  /** Seconds; 0 or absent = never. When it expires the whole process group is killed (status `killed`). */
  killAfter?: number;
  keepAlive?: boolean;
  /** Restart when a run fails (non-zero exit), up to maxRestarts times (negative = unlimited), after 1 s. */
  restartOnFailure?: boolean;
  maxRestarts?: number;
  /** Give the process a stdin pipe (writeStdin/closeStdin); otherwise it reads /dev/null. */
  stdin?: boolean;
}

export interface ProcessRecord {
  pid: string;
  name: string;
  command: string;
  status: ProcessStatus;
  /** Exit status; null while running and when ended by a signal or unknown. */
  exitCode: number | null;
  /** Why it failed, was stopped or killed; null for a clean exit and while running. */
  error: string | null;
  startedAt: string;
  completedAt: string | null;
  workingDir: string;
  keepAlive: boolean;
  timeout: number;
  killAfter: number;
  restartOnFailure: boolean;
  maxRestarts: number;
  restartCount: number;
  stdin: boolean;
}

export interface ProcessOutput {
  stdout: string;
  stderr: string;
  /** stdout then stderr, concatenated (as the reference daemon does), not interleaved. */
  logs: string;
}

export interface ProcessManagerOptions {
  db: Db;
  paths: SandboxPaths;
  clock: Clock;
  logger: Logger;
  /** Where output files live (in the data dir). */
  logDir: string;
  /** Per-stream output cap (tail kept). */
  logMaxBytes: number;
  /** How long `stop` waits after SIGTERM before SIGKILL. */
  stopGraceMs: number;
  /** Finished processes kept (with their output); older ones are forgotten. */
  maxFinished: number;
  /** The environment commands inherit (default: the agent's), read at each spawn (environment reload). */
  baseEnv?: NodeJS.ProcessEnv | (() => NodeJS.ProcessEnv);
  /** Pause before a restart (reference: 1 s). */
  restartDelayMs?: number;
  /** Sandbox path of commands that name no workingDir (the reference: the daemon's cwd, the image's WORKDIR); default `/`. */
  defaultWorkingDir?: string;
  /** Argv prefix every command starts through (`<wrapper...> /bin/sh -c <command>`), e.g. a capability drop. */
  wrapper?: readonly string[];
  /** How commands start (default spawnHere: as the agent's children); an agent host enters the sandbox's namespaces (ns-spawn.ts). */
  spawner?: Spawner;
  /** Reads the sandbox's OOM-kill counter (cgroup `oom_kill`); undefined where there is none. */
  oomKills?: () => number | undefined;
}
