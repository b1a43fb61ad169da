import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { adoption } from "./bwrap-adoption.js";
import { agentArgv, sandboxEnv, trustEgress } from "./bwrap-layout.js";
import type { WarmSandbox } from "./bwrap-warm.js";
import { adoptChild } from "./child.js";
import type { SandboxKit } from "./sandbox-kit.js";
import { hostsFile, keepHostsCurrent, setHostname } from "./sandbox-setup.js";
import type { AgentHandle, LaunchSpec } from "./types.js";
import type { WarmActivation } from "./warm-agent.js";

export interface ActivationContext {
  kit: SandboxKit;
  readyTimeoutMs?: number;
  /** Called when the host refuses the spec's memory limit (the launcher then says why in /health). */
  limitFailed(why: string): void;
}

/** A warm sandbox becomes this one: its directories take the spec's paths, its agent gets the spec's argv and env. */
export async function activateWarm(warm: WarmSandbox, spec: LaunchSpec, ctx: ActivationContext): Promise<AgentHandle> {
  // The sandbox's binds follow the directories' inodes: renamed, they stay mounted where they were.
  for (const [from, to] of [
    [warm.rootDir, spec.rootDir],
    [warm.dataDir, spec.dataDir],
  ] as const) {
    mkdirSync(dirname(to), { recursive: true });
    renameSync(from, to);
  }
  try {
    if (spec.memoryMb) warm.sandbox.cgroup?.limit(spec.memoryMb);
  } catch (err) {
    ctx.limitFailed(`setting a memory limit failed: ${(err as Error).message}`);
  }
  writeFileSync(join(spec.dataDir, "etc", "hosts"), hostsFile(spec.sandbox, spec.egress?.hosts));
  keepHostsCurrent(join(spec.dataDir, "etc", "hosts"), spec, warm.sandbox.child);
  if (spec.egress) trustEgress(spec, spec.egress, false);
  if (spec.egress?.direct === false) await warm.sandbox.setDirect(false);
  // Named while its agent activates (the agent never reads the hostname): the create answers once both are done.
  const named = setHostname(warm.sandbox.sandboxPid()!, spec.sandbox.slice(0, 63));
  const activation: WarmActivation = { argv: agentArgv(spec, warm.sandbox.cgroup !== undefined, ctx.kit), env: sandboxEnv(spec) as Record<string, string> };
  const [handle] = await Promise.all([
    adoptChild(warm.sandbox.child, adoption(warm.sandbox, spec, ctx.kit, ctx.readyTimeoutMs), () => warm.sandbox.child.send(activation)),
    named,
  ]);
  return handle;
}
