import { spawn } from "node:child_process";
import { closeSync, existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { LogFiles } from "./output.js";
import type { SpawnedRun, Spawner, SpawnSpec } from "./spawn.js";

/**
 * Commands started from outside a sandbox, inside it: an agent host (one
 * process serving many sandboxes' APIs) cannot be the commands' parent in the
 * sandbox, so each command goes through native/nsexec (built into dist/native),
 * which joins the sandbox's cgroup, enters the namespaces of its PID 1 (user
 * first, then cgroup, ipc, uts, net, pid, mnt), chroots to that process's root,
 * chdirs to the working directory there, forks into the PID namespace, makes
 * the command its own session, limits its capabilities, changes its ids and
 * execs the sandbox's shell. It reports the command's host and sandbox pids on
 * a pipe and then mirrors the command's end as its own, so the supervisor
 * follows a run exactly as it follows its own children's.
 *
 * nsenter(1) was measured against it (bench/nsenter.ts): nsenter cannot join a
 * cgroup or drop capabilities, so it needs the kit's setpriv after it (one more
 * exec) and a shell stage before it, and its command shares nsenter's process
 * group (a session leader outside the sandbox's PID namespace).
 */

/** Capability numbers (linux/capability.h), by setpriv's names. */
const CAPABILITY_NUMBERS: Readonly<Record<string, number>> = {
  chown: 0,
  dac_override: 1,
  dac_read_search: 2,
  fowner: 3,
  fsetid: 4,
  kill: 5,
  setgid: 6,
  setuid: 7,
  setpcap: 8,
  linux_immutable: 9,
  net_bind_service: 10,
  net_broadcast: 11,
  net_admin: 12,
  net_raw: 13,
  ipc_lock: 14,
  ipc_owner: 15,
  sys_module: 16,
  sys_rawio: 17,
  sys_chroot: 18,
  sys_ptrace: 19,
  sys_pacct: 20,
  sys_admin: 21,
  sys_boot: 22,
  sys_nice: 23,
  sys_resource: 24,
  sys_time: 25,
  sys_tty_config: 26,
  mknod: 27,
  lease: 28,
  audit_write: 29,
  audit_control: 30,
  setfcap: 31,
  mac_override: 32,
  mac_admin: 33,
  syslog: 34,
  wake_alarm: 35,
  block_suspend: 36,
  audit_read: 37,
  perfmon: 38,
  bpf: 39,
  checkpoint_restore: 40,
};

/** nsexec's `--caps` mask for a list of capability names; throws on a name it does not know. */
export function capabilityMask(names: readonly string[]): string {
  let mask = 0n;
  for (const name of names) {
    const bit = CAPABILITY_NUMBERS[name];
    if (bit === undefined) throw new Error(`unknown capability '${name}'`);
    mask |= 1n << BigInt(bit);
  }
  return `0x${mask.toString(16)}`;
}

/** Where the sandbox is and what its commands may be, as the host sees it. */
export interface NamespaceTarget {
  /** Host pid of the sandbox's PID 1 (bwrap's init): its namespaces and root are the command's. */
  pid: number;
  /** The sandbox cgroup's `cgroup.procs` (host path): its memory limit then counts the command. None: the host's cgroup. */
  cgroupProcs?: string;
  /** Capabilities a command may ever hold (e.g. COMMAND_CAPABILITIES); undefined keeps the user namespace's full set. */
  capabilities?: readonly string[];
  /** The image's User as ids inside the sandbox; undefined runs commands as the sandbox's root. */
  user?: { uid: number; gid: number; groups?: readonly number[] };
}

/** The built helper, or undefined when build-native could not compile it (no C compiler). */
export function nsexecPath(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  // dist/sandbox-agent/process -> dist/native; from the sources (tests) the same built file.
  for (const candidate of [join(here, "../../native/nsexec"), join(here, "../../dist/native/nsexec")]) {
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** nsexec's argv up to (not including) the command: also what a PTY spawns (`tty`) to put a shell in the sandbox. */
export function nsexecArgs(target: NamespaceTarget, workingDir: string, options: { tty?: boolean; reportFd?: number } = {}): string[] {
  const args = ["--target", String(target.pid), "--cwd", workingDir];
  if (options.reportFd !== undefined) args.push("--report", String(options.reportFd));
  if (options.tty) args.push("--tty");
  if (target.cgroupProcs) args.push("--cgroup-procs", target.cgroupProcs);
  if (target.capabilities) args.push("--caps", capabilityMask(target.capabilities));
  if (target.user) {
    args.push("--gid", String(target.user.gid), "--uid", String(target.user.uid));
    if (target.user.groups) args.push(...(target.user.groups.length > 0 ? ["--groups", target.user.groups.join(",")] : ["--clear-groups"]));
  }
  return [...args, "--"];
}

/**
 * How a terminal's shell gets into a sandbox an agent host serves from outside: whether a path exists inside the
 * sandbox (the shell it looks for), and the shell started there on a terminal of the sandbox's own.
 */
export interface TerminalEntry {
  exists(path: string): boolean;
  open(shell: string, workingDir: string, size: { cols: number; rows: number }, env: Record<string, string>): Promise<TerminalProcess>;
}

/** What a terminal session uses of its PTY (node-pty's IPty has it all). */
export interface TerminalProcess {
  /** Host pid of the shell: its session is what ends with the terminal. */
  readonly pid: number;
  onData(listener: (data: string) => void): { dispose(): void };
  onExit(listener: (e: { exitCode: number; signal?: number }) => void): { dispose(): void };
  write(data: string): void;
  resize(cols: number, rows: number): void;
  pause(): void;
  resume(): void;
}

/** Starts nsexec with `tty` as its stdio and a report pipe; resolves with the child and the command's host pid. */
export async function spawnOnTerminal(
  target: NamespaceTarget,
  workingDir: string,
  argv: string[],
  tty: number,
  env: NodeJS.ProcessEnv,
  helper = nsexecPath(),
): Promise<{ child: import("node:child_process").ChildProcess; pid: number }> {
  if (!helper) throw new Error("native/nsexec is not built");
  const child = spawn(helper, [...nsexecArgs(target, workingDir, { tty: true, reportFd: 3 }), ...argv], { cwd: "/", env, stdio: [tty, tty, tty, "pipe"] });
  child.on("error", () => {});
  return { child, pid: parseReport(await readReport(child.stdio[3] as Readable)).pid };
}

/** nsexec's report line: the command's host and sandbox pids, or why nothing runs (NamespaceEntryError). */
function parseReport(report: string): { pid: number; sandboxPid: number } {
  const ok = /^ok (\d+) (\d+)\n$/.exec(report);
  if (ok) return { pid: Number(ok[1]), sandboxPid: Number(ok[2]) };
  const failed = /^error (\S+) (\d+) (.*)\n$/.exec(report);
  if (failed) throw new NamespaceEntryError(failed[1]!, Number(failed[2]), failed[3]!);
  throw new Error(`the namespace helper ended without a report (${report.trim() || "nothing"})`);
}

/** Why a command could not start, from nsexec's report: the stage and the OS's message. */
export class NamespaceEntryError extends Error {
  constructor(
    readonly stage: string,
    readonly errno: number,
    message: string,
  ) {
    super(stage === "exec" ? message : `${stage}: ${message}`);
  }
}

function readReport(stream: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => (text += chunk));
    stream.once("error", reject);
    stream.once("end", () => resolve(text));
  });
}

/**
 * A Spawner (ProcessManagerOptions.spawner) whose commands run in the sandbox
 * of `target()` (read at each start: a restarted sandbox has a new PID 1).
 * The wrapper of the in-sandbox agent is not used: nsexec limits capabilities
 * and changes ids itself.
 */
export function namespaceSpawner(target: () => NamespaceTarget, helper = nsexecPath()): Spawner {
  if (!helper) throw new Error("native/nsexec is not built (no C compiler at install): commands cannot enter a sandbox from outside");
  return async (spec: SpawnSpec, files: LogFiles): Promise<SpawnedRun> => {
    const fds = files.openForChild();
    const shell = spec.shell;
    let child;
    try {
      const args = [...nsexecArgs(target(), spec.workingDir, { reportFd: 3 }), shell.file, ...shell.args, spec.command];
      child = spawn(helper, args, { cwd: "/", env: spec.env, detached: true, stdio: [spec.stdin ? "pipe" : "ignore", fds.stdout, fds.stderr, "pipe"] });
    } finally {
      closeSync(fds.stdout);
      closeSync(fds.stderr);
    }
    if (child.pid === undefined) throw await new Promise<Error>((resolve) => child.once("error", resolve));
    child.on("error", () => {});
    const report = await readReport(child.stdio[3] as Readable);
    child.unref();
    try {
      return { child, ...parseReport(report) };
    } catch (err) {
      child.stdin?.destroy();
      throw err;
    }
  };
}

/**
 * The `cgroup.procs` (host path) of the cgroup a sandbox's PID 1 is in, for its memory limit: cgroup v2's single
 * hierarchy, else v1's memory controller. Undefined where there is nothing to join: the same cgroup as this
 * process (the launcher made none for the sandbox: no limit, or no writable cgroup as a normal user), or none
 * found (no cgroup filesystem, the process gone).
 */
export function cgroupProcsOf(pid: number, mounts = "/sys/fs/cgroup"): string | undefined {
  const theirs = memoryCgroupFile(String(pid), mounts);
  return theirs && theirs !== memoryCgroupFile("self", mounts) && existsSync(theirs) ? theirs : undefined;
}

function memoryCgroupFile(pid: string, mounts: string): string | undefined {
  let lines: string[];
  try {
    lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n");
  } catch {
    return undefined;
  }
  const v2 = lines.find((l) => l.startsWith("0::"));
  const v1 = lines.find((l) => l.split(":")[1]?.split(",").includes("memory"));
  return v1 ? join(mounts, "memory", v1.split(":")[2]!, "cgroup.procs") : v2 ? join(mounts, v2.slice(3), "cgroup.procs") : undefined;
}
