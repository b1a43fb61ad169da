import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../src/logging.js";
import { listen, type UpgradeListener } from "../src/serve.js";
import { rawReply } from "../src/tunnel.js";
import { createSimulatorApp } from "./app.js";
import type { SimConfig } from "./config.js";
import type { SimDeps } from "./deps.js";
import { assembleDeps, openState } from "./root.js";
import { exportLines, sdkEnv } from "./env-lines.js";
import { listenFailure } from "../src/startup.js";
import { createLauncher, defaultStartConcurrency, describeLauncher, ProcessLauncher, StartQueue, type Launcher } from "./launcher/index.js";
import { defaultImageCacheDir, ImageStore } from "./images/image-store.js";
import { HOST_ROOT, SandboxImages, type PrebuildStatus } from "./images/sandbox-images.js";
import { callbackProgress } from "./images/progress.js";
import { createSimulatorSandboxProxy } from "./sandbox-proxy.js";
import { SimulatorEgress } from "./egress/index.js";
import type { SimulatorHandler } from "./egress/in-process.js";
import { SandboxAgents } from "./agents/registry.js";

import { mountsUnder } from "../src/mounts.js";
import { JobRunner } from "./jobs/runner.js";
import { ApplicationRunner, applicationOfLaunch } from "./applications/runner.js";
import { recordApplicationEvent } from "./applications/app-status.js";
import { createApplicationProxy } from "./applications/app-proxy.js";
import { failInterruptedPushes } from "./images/image-push.js";
import { loopVolumesUnsupported, unmountAllVolumeImages } from "./agents/volume-fs.js";
import { recoverSandboxes } from "./sandboxes/recovery.js";
import { recordAgentEvent, recordStatus } from "./sandboxes/status.js";
import { prepareVolumes, provisionAllVolumes } from "./sandboxes/volume-use.js";
import { meterSandboxStandby } from "./sandboxes/sandbox-usage.js";
import { expireDueSandboxes, recordLastUse, startExpirySweeps } from "./sandboxes/expiry.js";

export interface ServeOptions {
  /** "bwrap" (default: isolated), "process" (not isolated), "docker", "swarm", or a Launcher instance. */
  launcher?: string | Launcher;
  logger?: Logger;
}

export interface ServedSimulator {
  url: string;
  /** The variables (BL_API_URL, BL_RUN_URL, BL_WORKSPACE, BL_API_KEY, ...) that point @blaxel/core here. */
  env: Record<string, string>;
  /** The same as `export KEY=value` lines, for a shell. */
  envText: string;
  deps: SimDeps;
  /** The sandboxes' agents (bench/ and tests look at their processes). */
  agents: SandboxAgents;
  /** The start-up build (config.prebuild): settles when it is ready or failed; undefined when none was started. */
  prebuilt: Promise<PrebuildStatus | undefined>;
  /** Stops everything (about 10 s at most: agents get SIGKILL after their grace) and removes the temp dir. */
  stop(): Promise<void>;
  /** For a forced exit (synchronous, e.g. on process "exit"): kills the agents and removes the temp dir now. */
  abandon(): void;
}

/**
 * The whole simulator: control plane, one real sandbox-agent per sandbox, and
 * the sandbox proxy in front (a request for /sbx/... or an sbx-* host goes to
 * the proxy, everything else to the control-plane app). Sandbox files live
 * beside the --data file (<data>.sandboxes/), or in a temp dir removed on stop.
 */
export async function serveSimulator(config: Partial<SimConfig>, options: ServeOptions = {}): Promise<ServedSimulator> {
  const state = openState(config, { logger: options.logger });
  const core = state.core;
  const name = options.launcher ?? core.config.launcher;
  let launcher: Launcher;
  try {
    launcher =
      typeof name === "object"
        ? name
        : name === "process"
          ? new ProcessLauncher({ warm: core.config.warmSandboxes })
          : createLauncher(name, {
              network: core.config.sandboxNetwork,
              warm: core.config.warmSandboxes,
              agents: { mode: core.config.agentMode, logger: core.logger },
              swarm: { constraints: core.config.swarmConstraints, registry: core.config.swarmRegistry },
            });
  } catch (err) {
    state.close(); // nothing left behind: no data dir, no listener
    throw err;
  }
  const inMemory = core.config.data === ":memory:";
  const dir = inMemory ? mkdtempSync(join(tmpdir(), "sandbox-sim-")) : `${core.config.data}.sandboxes`;
  mkdirSync(dir, { recursive: true });
  // Every user id in each sandbox where subordinate ids can be had; said once when not (also in /health).
  const ids = launcher.mapIds?.(dir);
  if (ids?.kind === "single")
    core.logger.warn({ reason: ids.reason }, "sandboxes have a single user id (root): chown to other ids, useradd and su fail in them");
  // Standby (/health): the idle period, or why sandboxes never sleep with this launcher (said once at start).
  const standby =
    launcher.standby === true
      ? { afterMs: core.config.standbyAfterMs }
      : { unavailable: launcher.standby ?? `the ${launcher.name} launcher cannot stop a sandbox in place` };
  const sandboxIsolation = { ...describeLauncher(launcher), standby };
  if ("unavailable" in standby && core.config.standbyAfterMs > 0)
    core.logger.warn({ launcher: launcher.name, reason: standby.unavailable }, "standby: sandboxes never go to standby here");
  if (!sandboxIsolation.isolated) core.logger.warn({ launcher: sandboxIsolation.launcher }, `sandboxes are ${sandboxIsolation.detail}`);
  // Images (docs/images.md): checked at create with any launcher; resolved to a root filesystem only for the
  // launchers that lay a sandbox over one (Launcher.usesImageRoot; not process, on the host's root, nor docker, which runs images itself).
  const storeImages =
    core.config.imageSource === "store"
      ? new SandboxImages(
          new ImageStore({ dir: core.config.imageCache === "local" ? join(dir, "images") : (core.config.imageCache ?? defaultImageCacheDir()) }),
          launcher.usesImageRoot === true,
          core.logger,
          (workspace, sandbox, text) => {
            // A build on first use: what it is doing goes to the sandbox's (or the application's) events (its status stays).
            core.logger.info({ workspace, sandbox, image: text }, "sandbox image");
            const application = applicationOfLaunch(sandbox);
            if (application) return recordApplicationEvent(core, workspace, application, `image: ${text}`, "image");
            const status = core.resources.get(workspace, "sandbox", sandbox)?.status;
            if (status) recordStatus(core, workspace, sandbox, status, `image: ${text}`, "image", false);
          },
          launcher.singleUserId?.bind(launcher),
        )
      : undefined;
  // Launchers that run images in Docker engines get them from the store when an engine lacks one (docker-supply.ts).
  if (storeImages) launcher.useImages?.(storeImages.dockerSupply());
  const images = storeImages ?? HOST_ROOT;
  // Sandboxes reach the simulator's public surface and the outside through its egress proxy (simulator/egress).
  let listenUrl: string | undefined;
  let inProcess: SimulatorHandler | undefined;
  const egress = new SimulatorEgress({
    caDir: inMemory ? undefined : join(dir, "egress-ca"),
    logger: core.logger.child({ component: "egress" }),
    resources: core.resources,
    urls: () => ({ base: core.urls.base, listen: listenUrl ?? core.urls.base }),
    outbound: core.config.sandboxNetwork === "outbound",
    handler: () => inProcess,
    workspaces: () => core.accounts.allWorkspaces().map((w) => w.name),
  });
  const agents: SandboxAgents = new SandboxAgents({
    egress: {
      launchFor: (workspace, sandbox) => egress.launchFor({ workspace, sandbox }),
      directAllowed: (workspace, sandbox) => egress.directAllowed({ workspace, sandbox }),
      hasPolicy: (workspace, sandbox) => {
        const policy = egress.policyOf({ workspace, sandbox });
        return !!policy && policy.allowedDomains.length + policy.forbiddenDomains.length + policy.routing.length > 0;
      },
    },
    launcher,
    dir,
    images,
    startQueue: new StartQueue(core.config.startConcurrency ?? defaultStartConcurrency()),
    logLevel: core.config.logLevel === "silent" ? "silent" : "warn",
    retentionMs: core.config.sandboxRetentionMs,
    now: () => core.clock.now(),
    logger: core.logger,
    onUse: (workspace, sandbox) => recordLastUse(core, workspace, sandbox),
    standbyAfterMs: core.config.standbyAfterMs,
    onStandby: (workspace, sandbox, state) => meterSandboxStandby(core, workspace, sandbox, state),
    prepareVolumes: (workspace, sandbox, volumes) => prepareVolumes(core, agents, workspace, sandbox, volumes),
    onEvent: (workspace, sandbox, event) => {
      // Where each sandbox's agent runs (pid, endpoint, launcher): what a person needs to look at it directly.
      const where = "url" in event ? { pid: event.pid, endpoint: event.socketPath ? `unix:${event.socketPath}` : event.url, launcher: launcher.name } : {};
      core.logger.info({ workspace, sandbox, event: event.type, ...where }, "sandbox agent");
      recordAgentEvent(core, workspace, sandbox, event);
      deps.onSandboxAgentEvent(workspace, sandbox, event); // usage: the agent's run time (account metrics)
    },
  });
  // Volumes: a filesystem of their size where the host allows it (loop-mounted ext4), else plain directories.
  const noLoop = loopVolumesUnsupported();
  if (noLoop) core.logger.warn({ reason: noLoop }, "volumes are plain directories: spec.size is not enforced");
  await provisionAllVolumes(core, dir);
  // Job executions run their tasks through the same launcher (simulator/jobs/runner.ts).
  const jobs = new JobRunner({
    launcher,
    dir,
    deps: core,
    logLevel: core.config.logLevel === "silent" ? "silent" : "warn",
    egress: (workspace, task) => egress.launchFor({ workspace, sandbox: task, job: true }),
  });
  jobs.failInterrupted(core.accounts.allWorkspaces().map((w) => w.name));
  // Applications run their images through the same launcher too (simulator/applications/runner.ts).
  const applications = new ApplicationRunner({
    launcher,
    dir,
    images,
    deps: core,
    logLevel: core.config.logLevel === "silent" ? "silent" : "warn",
    listenTimeoutMs: core.config.applicationListenTimeoutMs,
  });
  // Everything is built: the dependencies handlers see, once and complete.
  const deps = assembleDeps(core, { agents, jobs, applications, images, sandboxIsolation });
  const proxy = createSimulatorSandboxProxy(deps, agents);
  const applicationUrls = createApplicationProxy(applications, core.resources, () => core.clock.now());
  const app = createSimulatorApp(deps);
  const handler: RequestListener & UpgradeListener = (req: IncomingMessage, res: ServerResponse) => {
    if (!proxy.handle(req, res) && !applicationUrls.handle(req, res)) app(req, res);
  };
  // WebSockets (a dev server's hot reload) through sandbox URLs (/port/{n}) and previews.
  handler.onUpgrade = (req, socket, head) => {
    if (!proxy.upgrade(req, socket, head) && !applicationUrls.upgrade(req, socket, head))
      rawReply(socket, 404, { error: "not_found", code: 404, message: `no upgrade route for ${req.url}` });
  };
  const serving = await listen(handler, deps.config.host, deps.config.port).catch(async (err: unknown) => {
    // Nothing is left behind by a failed start (a port in use): no temp dir, no warm agent, no open database.
    proxy.close();
    await launcher.close?.();
    state.close();
    if (inMemory) rmSync(dir, { recursive: true, force: true });
    throw listenFailure(err, deps.config.host, deps.config.port) ?? err;
  });
  deps.urls.base = deps.config.publicUrl ?? serving.url;
  listenUrl = serving.url;
  inProcess = { request: handler, upgrade: handler.onUpgrade };
  // Sandbox expiry (ttl, expires, expiration policies): what came due while a --data simulator was down
  // expires first (no agent is started for it), then the sweep runs every 5 s.
  expireDueSandboxes(deps);
  // With --data, sandboxes from the previous run get their agents back (sandboxes/recovery.ts).
  recoverSandboxes(deps, agents);
  applications.recover(core.accounts.allWorkspaces().map((w) => w.name));
  failInterruptedPushes(
    core,
    core.accounts.allWorkspaces().map((w) => w.name),
  ); // `bl push` builds the previous run left unfinished
  agents.prepare(deps.config.workspace); // the default workspace's first create finds a warm sandbox
  // The image the first sandboxes will want, built now rather than on their create (docs/images.md); a create
  // meanwhile joins this build. Its progress goes to the log and GET /health (the console shows it).
  let prebuilt: Promise<PrebuildStatus | undefined> = Promise.resolve(undefined);
  if (deps.config.prebuild !== "none") {
    const image = deps.config.prebuild;
    prebuilt = images
      .prebuild(
        image,
        callbackProgress((text) => deps.logger.info({ image, build: text }, "default image")),
      )
      .then((status) => {
        if (status?.state === "ready") deps.logger.info({ image, seconds: status.seconds }, "default image ready");
        else if (status) deps.logger.warn({ image, err: status.error }, "default image build failed: creates of it will try again");
        return status;
      });
  }
  const stopExpiry = startExpirySweeps(deps, 5_000);
  const env = sdkEnv(deps, serving.url);
  const envText = exportLines(env);
  let stopped: Promise<void> | undefined;
  return {
    url: serving.url,
    env,
    envText,
    deps,
    agents,
    prebuilt,
    stop: () =>
      (stopped ??= (async () => {
        stopExpiry();
        const builds = images.close(); // a build under way ends now; sandboxes waiting for it fail fast
        await serving.stop(1_000);
        await Promise.all([jobs.stopAll(), applications.stopAll(), agents.stopAll(), builds]);
        unmountAllVolumeImages(dir); // their images stay beside --data; a restart mounts them again
        proxy.close();
        egress.close();
        state.close();
        if (inMemory) await removeTempDir(dir, deps.logger, launcher);
      })()),
    abandon: () => {
      agents.killAll();
      if (!inMemory || !existsSync(dir)) return;
      unmountAllVolumeImages(dir);
      removeTempDirSync(dir, deps.logger, launcher);
    },
  };
}

/** The temp dir of a simulator without --data; never through a mount left under it (a drive's files). */
async function removeTempDir(dir: string, logger: Logger, launcher: Launcher): Promise<void> {
  const mounted = mountsUnder(dir);
  if (mounted.length > 0) return void logger.warn({ dir, mounted }, "temp dir left: something is still mounted under it");
  // Files the sandboxes' other users wrote are removed inside the same id mapping (Launcher.removeTree).
  if (launcher.removeTree) return removeTempDirSync(dir, logger, launcher);
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
}

function removeTempDirSync(dir: string, logger: Logger, launcher: Launcher): void {
  const mounted = mountsUnder(dir);
  if (mounted.length > 0) return void logger.warn({ dir, mounted }, "temp dir left: something is still mounted under it");
  try {
    if (launcher.removeTree) launcher.removeTree(dir);
    else rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  } catch (err) {
    logger.warn({ dir, err: (err as Error).message }, "temp dir not fully removed");
  }
}
