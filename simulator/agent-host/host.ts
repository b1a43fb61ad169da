import { cpus } from "node:os";
import type { Logger } from "../../src/logging.js";
import { openat2Support } from "../../sandbox-agent/paths/openat2.js";
import { nsexecPath } from "../../sandbox-agent/process/ns-spawn.js";
import { SearchPool } from "../../sandbox-agent/search/pool.js";
import { DEFAULT_BOUNDS, type RequestBounds } from "./bounds.js";
import { openHostedAgent, type HostedAgent, type HostedSandbox } from "./instance.js";
import { netnsSupport } from "./netns.js";

/**
 * The agent host: one place in the simulator's process that serves every isolated sandbox's agent API, one
 * instance per sandbox (instance.ts), so that starting a sandbox starts no Node process. What instances share is
 * only what holds no sandbox's state: the search workers (a pool sized from the CPUs, started on the first search)
 * and the logger. docs/launchers.md "Agent host".
 */

export type AgentMode = "host" | "process";

/** Whether sandboxes can be served by the host here, or why each keeps an agent of its own. */
export function agentHostSupport(env: NodeJS.ProcessEnv = process.env): { available: true } | { available: false; reason: string } {
  // The agents' own confinement setting, forcing the fallback: the host confines by the kernel or not at all.
  if (env.SANDBOX_AGENT_CONFINEMENT === "path-checks")
    return { available: false, reason: "SANDBOX_AGENT_CONFINEMENT=path-checks: the agent host confines files with openat2 only" };
  if (!nsexecPath()) return { available: false, reason: "native/nsexec is not built (no C compiler at install)" };
  const confine = openat2Support();
  if (!confine.available) return { available: false, reason: `the kernel confinement of files is unavailable: ${confine.reason}` };
  const netns = netnsSupport();
  if (!netns.available) return { available: false, reason: netns.reason };
  return { available: true };
}

export class AgentHost {
  readonly #search: SearchPool;
  readonly #instances = new Set<HostedAgent>();
  readonly #nsexec: string;

  constructor(
    private readonly logger: Logger,
    private readonly bounds: RequestBounds = DEFAULT_BOUNDS,
  ) {
    const nsexec = nsexecPath();
    if (!nsexec) throw new Error("native/nsexec is not built: the agent host cannot enter sandboxes");
    this.#nsexec = nsexec;
    this.#search = new SearchPool({ size: Math.min(2, cpus().length), logger });
  }

  /** Builds the sandbox's agent instance and starts serving it (its socket, and inside the sandbox its port). */
  async open(spec: HostedSandbox): Promise<HostedAgent> {
    const agent = await openHostedAgent(spec, { logger: this.logger, search: this.#search, bounds: this.bounds, nsexec: this.#nsexec });
    this.#instances.add(agent);
    const close = agent.close.bind(agent);
    return {
      ...agent,
      close: async (graceMs) => {
        await close(graceMs);
        this.#instances.delete(agent);
      },
    };
  }

  /** Instances serving now. */
  get size(): number {
    return this.#instances.size;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#instances].map((a) => a.close(0)));
    this.#instances.clear();
    await this.#search.close();
  }
}
