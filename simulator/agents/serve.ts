import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../src/logging.js";
import { listen } from "../../src/serve.js";
import { createSimulatorApp } from "../app.js";
import type { SimConfig } from "../config.js";
import { openSimulator, type SimDeps } from "../deps.js";
import { envLines } from "../env-lines.js";
import { createLauncher, describeLauncher, ProcessLauncher, type Launcher } from "../launcher/index.js";
import { createSimulatorSandboxProxy } from "./proxy.js";
import { SandboxAgents } from "./registry.js";
import { launchOptions } from "../sandboxes/agent-lifecycle.js";
import { recordAgentEvent, recordStatus } from "./sandbox-status.js";
import { expireDueSandboxes, recordLastUse, startExpirySweeps } from "../sandboxes/expiry.js";

/** Sandboxes in these states have no agent to bring back. */
const GONE = new Set(["TERMINATED", "DELETING", "FAILED", "ARCHIVED", "DEACTIVATED"]);
/** A stop the previous run did not finish: its agent is gone now, so the move is complete. */
const STOPPED_AS: Record<string, string> = { ARCHIVING: "ARCHIVED", DEACTIVATING: "DEACTIVATED" };

export interface ServeOptions {
  /** "bwrap" (default: isolated), "process" (not isolated), "docker", or a Launcher instance. */
  launcher?: string | Launcher;
  logger?: Logger;
}

export interface ServedSimulator {
  url: string;
  /** KEY=value lines (BL_API_URL, BL_RUN_URL, BL_WORKSPACE, BL_API_KEY, ...) for @blaxel/core. */
  env: Record<string, string>;
  envText: string;
  deps: SimDeps;
  stop(): Promise<void>;
}

/**
 * The whole simulator: control plane, one real sandbox-agent per sandbox, and
 * the sandbox proxy in front (a request for /sbx/... or an sbx-* host goes to
 * the proxy, everything else to the control-plane app). Sandbox files live
 * beside the --data file (<data>.sandboxes/), or in a temp dir removed on stop.
 */
export async function serveSimulator(config: Partial<SimConfig>, options: ServeOptions = {}): Promise<ServedSimulator> {
  const runtime = openSimulator(config, { logger: options.logger });
  const deps = runtime.deps;
  const name = options.launcher ?? deps.config.launcher;
  let launcher: Launcher;
  try {
    launcher = typeof name === "object" ? name : name === "process" ? new ProcessLauncher({ warm: 1 }) : createLauncher(name, { network: deps.config.sandboxNetwork, warm: 1 });
  } catch (err) {
    runtime.close(); // nothing left behind: no data dir, no listener
    throw err;
  }
  deps.sandboxIsolation = describeLauncher(launcher);
  if (!deps.sandboxIsolation.isolated) deps.logger.warn({ launcher: deps.sandboxIsolation.launcher }, `sandboxes are ${deps.sandboxIsolation.detail}`);
  const inMemory = deps.config.data === ":memory:";
  const dir = inMemory ? mkdtempSync(join(tmpdir(), "sandbox-sim-")) : `${deps.config.data}.sandboxes`;
  mkdirSync(dir, { recursive: true });
  const agents = new SandboxAgents({
    launcher,
    dir,
    logLevel: deps.config.logLevel === "silent" ? "silent" : "warn",
    retentionMs: deps.config.sandboxRetentionMs,
    now: () => deps.clock.now(),
    logger: deps.logger,
    onUse: (workspace, sandbox) => recordLastUse(deps, workspace, sandbox),
    onEvent: (workspace, sandbox, event) => {
      deps.logger.info({ workspace, sandbox, event: event.type }, "sandbox agent");
      recordAgentEvent(deps, workspace, sandbox, event);
      deps.onSandboxAgentEvent(workspace, sandbox, event); // usage: the agent's run time (account metrics)
    },
  });
  deps.agents = agents;
  const proxy = createSimulatorSandboxProxy(deps, agents);
  const app = createSimulatorApp(deps);
  const serving = await listen((req: IncomingMessage, res: ServerResponse) => {
    if (!proxy.handle(req, res)) app(req, res);
  }, deps.config.host, deps.config.port);
  deps.urls.base = deps.config.publicUrl ?? serving.url;
  // Sandbox expiry (ttl, expires, expiration policies): what came due while a --data simulator was down
  // expires first (no agent is started for it), then the sweep runs every 5 s.
  expireDueSandboxes(deps);
  // With --data, sandboxes from the previous run get their agents back: an agent the previous run
  // left behind is stopped first (launcher pid file), then a fresh one serves the same files.
  for (const ws of deps.accounts.allWorkspaces()) {
    for (const item of deps.resources.allOfKind(ws.name, ["sandbox"])) {
      if (item.parent !== "" || GONE.has(item.status)) continue;
      const stopped = STOPPED_AS[item.status];
      if (stopped) {
        recordStatus(deps, ws.name, item.name, stopped, `${stopped.toLowerCase()}: the simulator restarted while its agent was stopping`);
        continue;
      }
      recordStatus(deps, ws.name, item.name, "DEPLOYING", "the simulator restarted: starting the sandbox agent again");
      agents.begin(ws.name, item.name, launchOptions(item.doc));
    }
  }
  agents.prepare(deps.config.workspace); // the default workspace's first create finds a warm sandbox
  const stopExpiry = startExpirySweeps(deps, 5_000);
  const envText = envLines(deps, serving.url);
  const env = Object.fromEntries(envText.split("\n").map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]));
  let stopped: Promise<void> | undefined;
  return {
    url: serving.url,
    env,
    envText,
    deps,
    stop: () => (stopped ??= (async () => {
      stopExpiry();
      await serving.stop(2_000);
      await agents.stopAll();
      proxy.close();
      runtime.close();
      if (inMemory) rmSync(dir, { recursive: true, force: true });
    })()),
  };
}
