import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { AgentConfigSchema, type AgentConfig } from "../../sandbox-agent/config.js";
import { openAgent, type AgentOverrides, type AgentRuntime } from "../../sandbox-agent/agent.js";
import { createApp } from "../../sandbox-agent/app.js";
import { listen, type Serving } from "../../src/serve.js";
import { trackedTempDir } from "./temp-dirs.js";

export interface TestAgent {
  url: string;
  root: string;
  dataDir: string;
  config: AgentConfig;
  runtime: AgentRuntime;
  serving: Serving;
  /**
   * Stops the server and closes the agent; `keepFiles` leaves root and data dir for a restart. Without it, the
   * temp dirs holding them go, a restarted agent's too (it was given the first one's root and data dir).
   */
  stop(options?: { keepFiles?: boolean }): Promise<void>;
}

/**
 * Whether the agent's paths are confined by the kernel (openat2): absolute link targets are then sandbox
 * paths (under the root, as inside the sandbox), where path-checks reads them as host paths and refuses
 * those leaving the root with 403. Tests of links out of the root expect the one or the other.
 */
export function kernelConfined(agent: TestAgent): boolean {
  return agent.runtime.deps.paths.confinement.mode === "openat2";
}

/** A temp dir, removed by TestAgent.stop or else after the test file (test/helpers/setup.ts). */
export function tempDir(prefix = "sandbox-kit-"): string {
  return trackedTempDir(prefix);
}

/**
 * Starts a real agent on 127.0.0.1:0 with its own temp root and data dir.
 * `config` overrides any option (raw, as on the command line after parsing).
 */
export async function startTestAgent(config: Partial<Record<keyof AgentConfig, unknown>> = {}, overrides: AgentOverrides = {}): Promise<TestAgent> {
  const base = tempDir();
  const parsed = Object.freeze(
    AgentConfigSchema.parse({
      port: 0,
      root: join(base, "root"),
      dataDir: join(base, "data"),
      logLevel: "silent",
      // SANDBOX_AGENT_CONFINEMENT=path-checks runs a suite against the fallback (as the agent's own env does).
      ...(process.env.SANDBOX_AGENT_CONFINEMENT ? { confinement: process.env.SANDBOX_AGENT_CONFINEMENT } : {}),
      ...config,
    }),
  );
  const runtime = await openAgent(parsed, overrides);
  const serving = await listen(createApp(runtime.deps), "127.0.0.1", 0);
  return {
    url: serving.url,
    root: runtime.deps.paths.hostRoot,
    dataDir: parsed.dataDir,
    config: parsed,
    runtime,
    serving,
    async stop({ keepFiles = false } = {}) {
      await serving.stop(1_000);
      await runtime.close();
      if (keepFiles) return;
      for (const dir of new Set([base, dirname(parsed.root), dirname(parsed.dataDir)])) {
        if (dirname(dir) === tmpdir() && dir.startsWith(join(tmpdir(), "sandbox-kit-"))) rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
