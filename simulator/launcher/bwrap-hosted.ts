import type { Readable } from "node:stream";
import { join } from "node:path";
import type { AgentHost } from "../agent-host/host.js";
import type { HostedAgent } from "../agent-host/instance.js";
import { nsexecArgs } from "../../sandbox-agent/process/ns-spawn.js";
import { agentEnvWithoutToken } from "./agent-main.js";
import { caEnv, DRIVES, IN_SANDBOX_API_PORT, SANDBOX_PATH } from "./bwrap-layout.js";
import type { SpawnedSandbox } from "./bwrap-warm.js";
import { removePidFile, writePidFile } from "./child.js";
import { SOCKET_URL } from "./endpoint.js";
import { PortRefused } from "./port-handoff.js";
import { pidNamespaceMembers, signal, stopTree } from "./proc.js";
import { COMMAND_CAPABILITIES, type SandboxKit } from "./sandbox-kit.js";
import { LaunchError, type AgentExit, type AgentHandle, type LaunchSpec } from "./types.js";

/**
 * A bwrap sandbox served by the agent host (simulator/agent-host): the chain (cgroup, unshare + overlay, bwrap)
 * runs nothing but the kit's idle process; once bwrap has built the sandbox (the idle process says "ready"), the
 * host opens the sandbox's agent instance over its PID 1's root and namespaces. The handle is the same as for a
 * sandbox with its own agent: a Unix socket in the data dir, openPort, standby, stop.
 */

const STDERR_TAIL = 4096;
const DEFAULT_READY_MS = 20_000;

export interface HostedStart {
  host: AgentHost;
  /** The sandbox kit: its mount(8) and umount(8) are what drives run inside the sandbox. */
  kit: SandboxKit;
  /** Host path of nsexec (what the drives' mount(8) runs through, entering the sandbox with all its capabilities). */
  nsexec: string;
  readyTimeoutMs?: number;
}

/** Resolves with the sandbox's PID 1 once bwrap has built its root and started the idle process. */
function whenReady(sandbox: SpawnedSandbox, timeoutMs: number, stderr: () => string): Promise<number> {
  const child = sandbox.child;
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => fail(`the sandbox was not ready within ${timeoutMs} ms`), timeoutMs);
    const fail = (why: string) => {
      clearTimeout(timer);
      reject(new LaunchError(`${why}: ${stderr().trim()}`));
    };
    (child.stdout as Readable).setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (!out.includes("ready\n")) return;
      clearTimeout(timer);
      // bwrap's info (another pipe) may still be on its way: it was written before the idle process ran.
      (sandbox.reportedPid ?? Promise.reject(new Error("no pid"))).then(resolve, () => fail("bwrap did not report the sandbox's pid"));
    });
    child.once("exit", (code, sig) => fail(`the sandbox ended before it was ready (code ${code}, signal ${sig})`));
  });
}

export async function startHosted(start: HostedStart, spec: LaunchSpec, sandbox: SpawnedSandbox): Promise<AgentHandle> {
  const child = sandbox.child;
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-STDERR_TAIL)));
  let agent: HostedAgent | undefined;
  const exited = new Promise<AgentExit>((resolve) => {
    child.once("exit", (code, sig) => {
      removePidFile(spec.dataDir);
      // The sandbox is gone (stopped, or its init killed from inside): its agent instance goes with it.
      void (agent?.close(0) ?? Promise.resolve()).finally(() => setImmediate(() => resolve({ code, signal: sig, stderr })));
    });
  });
  try {
    const pid1 = await whenReady(sandbox, start.readyTimeoutMs ?? DEFAULT_READY_MS, () => stderr);
    const enter = [start.nsexec, ...nsexecArgs({ pid: pid1 }, "/")];
    const hosted = start.host.open({
      sandbox: spec.sandbox,
      token: spec.token,
      dataDir: spec.dataDir,
      socketPath: join(spec.dataDir, "agent.sock"),
      target: {
        pid: pid1,
        cgroupProcs: sandbox.cgroup ? join(sandbox.cgroup.dir, "cgroup.procs") : undefined,
        capabilities: COMMAND_CAPABILITIES,
        user: spec.user,
      },
      env: { ...caEnv(spec), ...agentEnvWithoutToken(spec, "/root"), PATH: spec.env?.PATH ?? SANDBOX_PATH },
      workingDir: spec.workingDir,
      logLevel: spec.logLevel,
      memoryEvents: sandbox.cgroup?.eventsFile,
      inSandboxPort: spec.inSandboxApi === false ? undefined : IN_SANDBOX_API_PORT,
      // mount(8) of the kit, run as the sandbox's root with its user namespace's capabilities: drives are kernel
      // mounts in the sandbox's mount namespace, as the sandbox's own agent makes them in process mode.
      drives: spec.drivesDir ? { sandboxDir: DRIVES, mount: [...enter, ...start.kit.mountProgram], umount: [...enter, ...start.kit.umountProgram] } : undefined,
    });
    const [opened] = await Promise.all([
      hosted,
      sandbox.network(),
      // The egress gateways: the simulator's address inside the sandbox, served here (gateway.ts's listeners).
      hosted.then((a) => Promise.all((spec.egress?.listen ?? []).map((l) => a.listenInside(l.host, l.port, (s) => spec.egress!.accept(s))))),
    ]);
    agent = opened;
    if (child.exitCode !== null || child.signalCode !== null) await agent.close(0);
  } catch (err) {
    child.kill("SIGKILL");
    await exited;
    throw err instanceof LaunchError ? err : new LaunchError(`the agent host could not serve the sandbox: ${(err as Error).message}`);
  }
  writePidFile(spec.dataDir, child.pid!);
  const pid1 = sandbox.sandboxPid()!;
  const served = agent;

  let stopped: number[] = [];
  let stopping: Promise<AgentExit> | undefined;
  return {
    url: SOCKET_URL,
    socketPath: served.socketPath,
    pid: child.pid,
    sandboxPid: pid1,
    openPort: (port) =>
      served.openPort(port).catch((err: NodeJS.ErrnoException) => {
        throw err.code === "ECONNREFUSED" ? new PortRefused(`nothing listens on port ${port} in the sandbox`, err.code) : err;
      }),
    setDirectOutbound: sandbox.setDirect,
    // Standby: the sandbox's processes stop where they are; its API stays up in the host (a request during the
    // transition is answered, and one that needs the sandbox wakes it first).
    freeze: async () => void (stopped = await stopTree(pid1, 10_000, pidNamespaceMembers)),
    thaw: async () => {
      for (const pid of stopped.length > 0 ? stopped : pidNamespaceMembers(pid1)) signal(pid, "SIGCONT");
      stopped = [];
    },
    exited,
    stop(graceMs = 5_000) {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return exited;
        await served.close(graceMs);
        // The sandbox ends with its init: bwrap's --die-with-parent and the kernel's end of a PID namespace take every
        // process in it, stopped ones included.
        child.kill("SIGKILL");
        return exited;
      })();
      return stopping;
    },
  };
}
