import { join } from "node:path";
import type { SpawnedSandbox } from "./bwrap-warm.js";
import { SOCKET_URL } from "./endpoint.js";
import { openGateways } from "./gateway.js";
import { portHandoff } from "./port-handoff.js";
import { cmdlineOf, continueTree, descendantsOf, signal, stopTree } from "./proc.js";
import type { SandboxKit } from "./sandbox-kit.js";
import { LaunchError, type LaunchSpec } from "./types.js";

/**
 * A spawned bwrap sandbox's life once its agent runs (what adoptChild is told): which processes a stop signals,
 * where the agent answers, what else must be up before it is ready, and standby's freeze and thaw of its PID
 * namespace from outside.
 */

function sandboxPidOf(sandbox: SpawnedSandbox): number {
  const pid = sandbox.sandboxPid();
  if (pid === undefined) throw new LaunchError("the sandbox's PID namespace is not known yet");
  return pid;
}

export function adoption(sandbox: SpawnedSandbox, spec: LaunchSpec, kit: SandboxKit, readyTimeoutMs: number | undefined) {
  let stopped: number[] = [];
  return {
    command: "bwrap",
    dataDir: spec.dataDir,
    readyTimeoutMs,
    // SIGTERM must reach the agent so it closes its database; bwrap does not forward signals.
    termTargets: (pid: number) => descendantsOf(pid).filter((p) => cmdlineOf(p).includes(kit.agentMain) || cmdlineOf(p).includes(kit.warmMain)),
    endpointOf: () => ({ url: SOCKET_URL, socketPath: join(spec.dataDir, "agent.sock") }),
    // The network, then the egress gateway: the simulator's address inside the sandbox (gateway.ts).
    alsoReady: () => Promise.all([sandbox.network(), spec.egress && openGateways(sandbox.child, spec.egress)]).then(() => undefined),
    sandboxPid: sandbox.sandboxPid,
    // The host cannot reach the sandbox's loopback: its agent connects there and hands the socket over.
    openPort: portHandoff(sandbox.child),
    setDirectOutbound: sandbox.setDirect,
    // Standby: every process of the sandbox's PID namespace (its init, the agent, what it runs) is stopped
    // from outside; slirp4netns, the egress gateways and the simulator are not in it and keep running.
    freeze: async () => void (stopped = await stopTree(sandboxPidOf(sandbox))),
    // A stopped process forks nothing: the processes stopped are all there is to continue (no /proc scan on
    // the resume path, which a request waits for).
    thaw: async () => {
      if (stopped.length === 0) return continueTree(sandboxPidOf(sandbox));
      for (const pid of stopped) signal(pid, "SIGCONT");
      stopped = [];
    },
  };
}
