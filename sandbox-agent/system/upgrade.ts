import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Logger } from "../../src/logging.js";
import { AGENT_VERSION } from "../version.js";

/** The reference's names: the new daemon learns its count from SANDBOX_UPGRADE_COUNT (reference §5.3). */
const COUNT_ENV = "SANDBOX_UPGRADE_COUNT";
const LAST_ENV = "SANDBOX_AGENT_LAST_UPGRADE";
/** Set for an agent started by an upgrade: it waits on its IPC channel for the old one to let go. */
export const HANDOVER_ENV = "SANDBOX_AGENT_HANDOVER";
/** The fresh agent, from the package on disk (dist/sandbox-agent/main.js beside this module's directory). */
const AGENT_MAIN = fileURLToPath(new URL("../main.js", import.meta.url));
/** The token descriptor of the new agent (a pipe this one writes and closes). */
const TOKEN_FD = 4;
/** How long the new agent may take to load before the upgrade is given up (this agent then carries on). */
const LOAD_TIMEOUT_MS = 60_000;

/** `/health`'s lastUpgrade, with the SDK's UpgradeStatus fields. */
export interface UpgradeStatus {
  status: "idle" | "running" | "completed" | "failed";
  step: string;
  version: string;
  lastAttempt?: string;
  error?: string;
  binaryPath?: string;
}

/** What `/health` reports of upgrades, and the hook POST /upgrade calls (set by the entry point that can replace the process). */
export class UpgradeState {
  count: number;
  last: UpgradeStatus;
  /** Starts an upgrade; undefined where this agent cannot replace itself (an app built without its entry point: tests). */
  trigger?: (version: string) => void;

  constructor(count = 0, last: UpgradeStatus = { status: "idle", step: "none", version: "" }) {
    this.count = count;
    this.last = last;
  }

  /** Reads (and removes, so the sandbox's commands do not inherit them) what the agent this one replaced handed over. */
  static fromEnv(env: NodeJS.ProcessEnv): UpgradeState {
    const count = Number(env[COUNT_ENV] ?? 0);
    let last: UpgradeStatus | undefined;
    try {
      last = env[LAST_ENV] ? (JSON.parse(env[LAST_ENV]!) as UpgradeStatus) : undefined;
    } catch {
      last = undefined;
    }
    delete env[COUNT_ENV];
    delete env[LAST_ENV];
    delete env[HANDOVER_ENV];
    return new UpgradeState(Number.isSafeInteger(count) && count >= 0 ? count : 0, last);
  }
}

export interface UpgradeContext {
  state: UpgradeState;
  logger: Logger;
  /** This agent's own arguments (its command line, or a warm agent's activation argv). */
  argv: string[];
  token?: string;
  /** Where this agent listens, which the new one takes over: its actual TCP port, or its Unix socket. */
  port: number;
  /** Stops serving and closes the agent's state (database, lock) without ending its commands; they stay this process's children. */
  release(): Promise<void>;
}

/** The argv prefix that started this process (a loader, node, its flags), from the kernel's copy of the command line. */
function launchPrefix(): string[] {
  const cmdline = readFileSync("/proc/self/cmdline", "utf8").split("\0");
  if (cmdline.at(-1) === "") cmdline.pop();
  // process.argv = [node, script, ...args]; the command line = [prefix..., script, ...args].
  return cmdline.slice(0, cmdline.length - (process.argv.length - 1));
}

/** This agent's arguments for the new one: same sandbox, same address, the token on a pipe, no launcher channel. */
export function successorArgv(argv: string[], port: number, hasToken: boolean): string[] {
  const out: string[] = [];
  const dropWithValue = new Set(["--token-file", "--token-fd", "--token", "--port"]);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const name = arg.split("=")[0]!;
    if (dropWithValue.has(name)) {
      if (!arg.includes("=")) i++;
      continue;
    }
    if (name === "--token-file-remove" || name === "--port-handoff") continue;
    out.push(arg);
  }
  out.push("--port", String(port));
  if (hasToken) out.push("--token-fd", String(TOKEN_FD));
  return out;
}

function message(child: ChildProcess, expected: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`the new agent did not say "${expected}" within ${timeoutMs / 1000} s`)), timeoutMs);
    const onMessage = (m: unknown) => {
      if (m === expected) done();
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => done(new Error(`the new agent exited (code ${code}, signal ${signal})`));
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      if (err) reject(err);
      else resolve();
    };
    child.on("message", onMessage);
    child.once("exit", onExit);
  });
}

/**
 * POST /upgrade (after its 200, as the reference answers before upgrading): starts a fresh agent from the
 * package on disk, lets it load, then stops serving and closes its own state and tells it to go on: it
 * listens where this one did and adopts the running commands, as after a restart. This process stays as a
 * keeper — whatever owns the sandbox (the simulator's launcher, a PID namespace) sees the same process
 * alive — still the parent of the commands it started, whose exits it records for the new agent; it
 * forwards SIGTERM and SIGINT and exits as the new agent does. A new agent that fails to load leaves this
 * one serving, with lastUpgrade failed.
 */
export async function upgradeAgent(ctx: UpgradeContext, version: string): Promise<void> {
  const { state, logger } = ctx;
  if (state.last.status === "running") return;
  const attempt = new Date().toISOString();
  state.last = { status: "running", step: "starting", version: version || AGENT_VERSION, lastAttempt: attempt, binaryPath: AGENT_MAIN };
  const completed: UpgradeStatus = { status: "completed", step: "completed", version: AGENT_VERSION, lastAttempt: attempt, binaryPath: AGENT_MAIN };
  const [file, ...prefix] = launchPrefix();
  const child = spawn(file!, [...prefix, AGENT_MAIN, ...successorArgv(ctx.argv, ctx.port, ctx.token !== undefined)], {
    stdio: ["ignore", "inherit", "inherit", "ipc", ctx.token !== undefined ? "pipe" : "ignore"],
    env: { ...process.env, [COUNT_ENV]: String(state.count + 1), [LAST_ENV]: JSON.stringify(completed), [HANDOVER_ENV]: "1" },
  });
  child.on("error", () => undefined);
  const tokenPipe = child.stdio[TOKEN_FD] as NodeJS.WritableStream | null;
  tokenPipe?.on("error", () => undefined);
  tokenPipe?.end(`${ctx.token}\n`);
  try {
    await message(child, "loaded", LOAD_TIMEOUT_MS);
  } catch (err) {
    child.kill("SIGKILL");
    state.last = { ...state.last, status: "failed", step: "starting", error: (err as Error).message };
    logger.error({ err: (err as Error).message }, "upgrade failed: the new agent did not load; this one carries on");
    return;
  }
  state.last = { ...state.last, step: "replace" };
  logger.info({ pid: child.pid }, "upgrade: handing the sandbox over to the new agent");
  becomeKeeper(child, logger);
  await ctx.release();
  child.send("go");
}

/** From now on this process only holds the sandbox's place for the new agent: signals go to it, its exit is ours. */
function becomeKeeper(child: ChildProcess, logger: Logger): void {
  process.removeAllListeners("SIGTERM");
  process.removeAllListeners("SIGINT");
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => child.kill(signal));
  child.once("exit", (code, signal) => {
    logger.info({ code, signal }, "the agent this one handed over to exited");
    process.exit(code ?? 128 + (signal === "SIGKILL" ? 9 : signal === "SIGINT" ? 2 : 15));
  });
}

/**
 * In the new agent: tell the old one the modules are loaded, then wait until it has let go of the
 * sandbox's address and state. Resolves at once for an agent not started by an upgrade. Once handed over,
 * the agent stops (as on SIGTERM) if its keeper dies, kill -9 included: the channel to it closes, and
 * nothing of the sandbox outlives the process its owner knows (bwrap's --die-with-parent, one level down).
 */
export function awaitHandover(env: NodeJS.ProcessEnv): Promise<void> {
  if (env[HANDOVER_ENV] !== "1" || !process.send) return Promise.resolve();
  return new Promise((resolve) => {
    process.once("message", (m) => {
      if (m !== "go") return;
      process.once("disconnect", () => process.kill(process.pid, "SIGTERM"));
      resolve();
    });
    process.send!("loaded");
  });
}
