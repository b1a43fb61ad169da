import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Socket } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { continueTree, isAlive, signal, startTimeOf } from "./proc.js";
import { agentFetch, forgetSocket, type AgentEndpoint } from "./endpoint.js";
import { LaunchError, type AgentExit, type AgentHandle } from "./types.js";

/** What the process and bwrap launchers share: spawn, wait until healthy, stop with a grace period. */

const READY_LINE = /sandbox-agent listening on ((?:http|unix):\S+)/;
const STDERR_TAIL = 4096;
export const DEFAULT_STOP_GRACE_MS = 5_000;
/** How long an agent that printed its address has to answer /health, whatever was left of the start's deadline. */
const HEALTH_GRACE_MS = 10_000;

export interface ChildSpec {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** The agent's data dir: a pid file there lets the next simulator run reap an agent it orphaned. */
  dataDir: string;
  readyTimeoutMs?: number;
  /** Pids to SIGTERM on stop; default the child itself (bwrap: the agent inside the namespace). */
  termTargets?: (childPid: number) => number[];
  /** Written to a pipe at descriptor 3 and closed (the agent's `--token-fd 3`), never put in env or argv. */
  tokenOnFd3?: string;
  /**
   * Maps the address the agent printed (http://... or unix:<path inside>) to
   * where the simulator reaches it; default: the printed TCP URL as is.
   */
  endpointOf?: (printed: string) => AgentEndpoint;
  /** Started once the agent has printed its address (its sandbox is set up), awaited with its health check (e.g. its network). */
  alsoReady?: () => Promise<void>;
  /** Extra fields of the handle (the sandbox's init pid). */
  sandboxPid?: () => number | undefined;
  /** The handle's openPort (AgentHandle). */
  openPort?: (port: number) => Promise<Socket>;
  /** The handle's setDirectOutbound (AgentHandle). */
  setDirectOutbound?: (on: boolean) => Promise<void>;
  /** The handle's freeze and thaw (AgentHandle, standby). */
  freeze?: () => Promise<void>;
  thaw?: () => Promise<void>;
}

const PID_FILE = "launcher.pid";

/**
 * An agent left running by a simulator that died without stopping it still
 * holds the data dir's database: stop it before starting a new one. The pid is
 * only trusted when that process's start time still matches (pids are reused).
 */
export async function reapOrphan(dataDir: string, graceMs = DEFAULT_STOP_GRACE_MS): Promise<boolean> {
  let pid: number;
  let started: string | undefined;
  try {
    const [pidText, startText] = readFileSync(join(dataDir, PID_FILE), "utf8").trim().split(" ");
    pid = Number(pidText);
    started = startText;
  } catch {
    return false;
  }
  removePidFile(dataDir);
  if (!Number.isInteger(pid) || pid <= 1 || !started || startTimeOf(pid) !== started) return false;
  signal(pid, "SIGTERM");
  continueTree(pid); // one left in standby holds SIGTERM pending until it runs again
  for (let waited = 0; waited < graceMs && isAlive(pid); waited += 50) await sleep(50);
  signal(pid, "SIGKILL");
  for (let waited = 0; waited < 2_000 && isAlive(pid); waited += 20) await sleep(20);
  return true;
}

/** Notes the chain's pid (and start time) in the data dir, for reapOrphan after a simulator that died. */
export function writePidFile(dataDir: string, pid: number): void {
  writeFileSync(join(dataDir, PID_FILE), `${pid} ${startTimeOf(pid) ?? ""}\n`);
}

export function removePidFile(dataDir: string): void {
  try {
    rmSync(join(dataDir, PID_FILE), { force: true });
  } catch {
    // The data dir itself is gone or broken: there is no pid file to remove.
  }
}

/**
 * Polls the agent's /health until it answers 2xx or `deadline` passes. `gone`
 * lets a launcher stop waiting as soon as it knows the agent died.
 */
export async function waitHealthy(
  endpoint: AgentEndpoint,
  deadline: number,
  options: { gone?: () => string | undefined; pollMs?: number } = {},
): Promise<void> {
  let last = "";
  while (Date.now() < deadline) {
    const gone = options.gone?.();
    if (gone) throw new LaunchError(gone);
    try {
      const res = await agentFetch(endpoint, { path: "/health", timeoutMs: 2_000 });
      if (res.status >= 200 && res.status < 300) return;
      last = `GET /health answered ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(options.pollMs ?? 25);
  }
  throw new LaunchError(`agent at ${endpoint.socketPath ?? endpoint.url} did not become healthy: ${last}`);
}

export async function startChild(spec: ChildSpec): Promise<AgentHandle> {
  await reapOrphan(spec.dataDir);
  if (spec.tokenOnFd3 === undefined) return adoptChild(spawn(spec.command, spec.args, { env: spec.env, stdio: ["ignore", "pipe", "pipe"] }), spec);
  const child = spawn(spec.command, spec.args, { env: spec.env, stdio: ["ignore", "pipe", "pipe", "pipe"] });
  const tokenPipe = child.stdio[3] as import("node:stream").Writable;
  tokenPipe.on("error", () => undefined); // the agent died before reading: adoptChild reports it
  tokenPipe.end(`${spec.tokenOnFd3}\n`);
  return adoptChild(child, spec);
}

/**
 * Waits for an already spawned agent to report its address and answer
 * /health; `activate` (warm agents) is called once the listeners are in place.
 */
export async function adoptChild(
  child: ChildProcess,
  spec: Pick<
    ChildSpec,
    "command" | "dataDir" | "readyTimeoutMs" | "termTargets" | "endpointOf" | "alsoReady" | "sandboxPid" | "openPort" | "setDirectOutbound" | "freeze" | "thaw"
  >,
  activate?: () => void,
): Promise<AgentHandle> {
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    stderr = (stderr + d).slice(-STDERR_TAIL);
  });
  const exited = new Promise<AgentExit>((resolve) => {
    child.once("exit", (code, sig) => {
      removePidFile(spec.dataDir);
      // Let stderr drain so the crash event carries the agent's last words.
      setImmediate(() => resolve({ code, signal: sig, stderr }));
    });
  });
  child.once("error", () => {}); // spawn failures also end in "exit" or are reported below

  const deadline = Date.now() + (spec.readyTimeoutMs ?? 20_000);
  const printed = await new Promise<string>((resolve, reject) => {
    let out = "";
    // A timer that fires late (a simulator starved of CPU) must not kill an agent whose address is already in
    // the pipe: the poll phase that runs before setImmediate's reads it first, and onData resolves.
    const timer = setTimeout(
      () => setImmediate(() => reject(new LaunchError(`agent did not report its address within ${spec.readyTimeoutMs ?? 20_000} ms: ${stderr.trim()}`))),
      deadline - Date.now(),
    );
    const onData = (d: string) => {
      out = (out + d).slice(-1024);
      const match = READY_LINE.exec(out);
      if (!match?.[1]) return;
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      child.stdout!.resume(); // keep draining: a full pipe would block the agent
      resolve(match[1]);
    };
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new LaunchError(`cannot start ${spec.command}: ${err.message}`));
    });
    void exited.then((exit) => {
      clearTimeout(timer);
      reject(new LaunchError(`agent exited before it was ready (code ${exit.code}, signal ${exit.signal}): ${exit.stderr.trim()}`));
    });
    activate?.();
  }).catch(async (err) => {
    child.kill("SIGKILL");
    await exited;
    throw err;
  });
  const endpoint = spec.endpointOf?.(printed) ?? { url: printed };
  if (endpoint.socketPath) void exited.then(() => forgetSocket(endpoint.socketPath!));
  try {
    // An agent that reported its address just before the deadline still gets time to answer its first /health.
    await Promise.all([waitHealthy(endpoint, Math.max(deadline, Date.now() + HEALTH_GRACE_MS)), spec.alsoReady?.()]);
  } catch (err) {
    child.kill("SIGKILL");
    await exited;
    throw err;
  }
  writePidFile(spec.dataDir, child.pid!);

  let stopping: Promise<AgentExit> | undefined;
  let frozen = false;
  return {
    ...endpoint,
    pid: child.pid,
    sandboxPid: spec.sandboxPid?.(),
    openPort: spec.openPort,
    setDirectOutbound: spec.setDirectOutbound,
    freeze:
      spec.freeze &&
      (async () => {
        frozen = true;
        await spec.freeze!();
      }),
    thaw:
      spec.thaw &&
      (async () => {
        await spec.thaw!();
        frozen = false;
      }),
    exited,
    stop(graceMs = DEFAULT_STOP_GRACE_MS) {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return exited;
        // A stopped process leaves SIGTERM pending: a sandbox in standby goes on first, then drains.
        if (frozen) await spec.thaw?.();
        const targets = spec.termTargets?.(child.pid!) ?? [child.pid!];
        for (const pid of targets) signal(pid, "SIGTERM");
        const force = setTimeout(() => child.kill("SIGKILL"), graceMs);
        const exit = await exited;
        clearTimeout(force);
        return exit;
      })();
      return stopping;
    },
  };
}
