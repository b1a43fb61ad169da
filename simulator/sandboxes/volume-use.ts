import type { Logger } from "../../src/logging.js";
import type { SandboxAgents } from "../agents/registry.js";
import { provisionVolume } from "../agents/volumes.js";
import { sandboxesNaming } from "../resources/kinds/storage.js";
import type { AccountStore } from "../store/accounts.js";
import type { ResourceStore } from "../store/resources.js";

/**
 * The one rule for a volume in use: a sandbox whose agent runs (or starts) names it. Such a volume is grown
 * online only; an offline resize would unmount it under that sandbox.
 */
export function volumeInUse(agents: Pick<SandboxAgents, "get">, workspace: string, mountedBy: readonly string[]): boolean {
  return mountedBy.some((sandbox) => agents.get(workspace, sandbox) !== undefined);
}

/**
 * Before a sandbox's agent starts with volumes: each is brought to its spec.size (a growth that had to wait is
 * applied now), online only while another sandbox uses it.
 */
export async function prepareVolumes(
  deps: { resources: ResourceStore; logger: Logger },
  agents: SandboxAgents,
  workspace: string,
  sandbox: string,
  volumes: string[],
): Promise<void> {
  for (const volume of volumes) {
    const size = deps.resources.get<{ spec: { size?: number } }>(workspace, "volume", volume)?.doc.spec.size;
    if (size === undefined) continue;
    const others = sandboxesNaming(deps.resources, workspace, volume).filter((name) => name !== sandbox);
    const pending = await provisionVolume(agents.dir, workspace, volume, size, volumeInUse(agents, workspace, others));
    if (pending) deps.logger.info({ workspace, sandbox, volume, reason: pending }, "volume growth still waits");
  }
}

/** At start: every volume of every workspace gets its filesystem (or directory) of its size, as before the restart. */
export async function provisionAllVolumes(deps: { accounts: AccountStore; resources: ResourceStore }, dir: string): Promise<void> {
  for (const ws of deps.accounts.allWorkspaces()) {
    for (const volume of deps.resources.allOfKind<{ spec: { size?: number } }>(ws.name, ["volume"]))
      await provisionVolume(dir, ws.name, volume.name, volume.doc.spec.size ?? 1024);
  }
}
