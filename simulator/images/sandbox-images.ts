import { ApiError } from "../../src/errors.js";
import type { Logger } from "../../src/logging.js";
import { applyImageConfig } from "./image-config.js";
import { ImageRefError } from "./image-ref.js";
import { ImageUserError } from "./image-user.js";
import { ImageNotFoundError, type ImageStore, type StoredImage } from "./image-store.js";
import type { ImageSupply, LaunchSpec } from "../launcher/types.js";
import { dockerImageSupply } from "./docker-supply.js";
import { agentFetch, agentRequest, type AgentEndpoint } from "../launcher/endpoint.js";
import { callbackProgress, type Progress } from "./progress.js";
import type { ImageService } from "./recipes.js";
import { ENTRYPOINT_PROCESS, entrypointService } from "./entrypoint.js";
import { DEFAULT_SANDBOX_IMAGE } from "../config.js";

/**
 * What sandboxes need from the image store: a create checks its image at
 * once (the platform answers 400 INVALID_IMAGE before any sandbox exists),
 * then the start resolves it to a root filesystem, building a hub image or
 * exporting a Docker image on first use (child processes: the event loop
 * keeps serving, the create waits).
 */

export interface ResolvedImage {
  ref: string;
  /** The image's root directories, top first (a template stacked over its base: several): LaunchSpec.imageRootDir, then imageLowerDirs. */
  layers: string[];
  /** The image's environment (Dockerfile ENV), under the sandbox's own envs. */
  env: Record<string, string>;
  workingDir: string;
  /** The image's User (Dockerfile USER), "" for root. */
  user: string;
  services: ImageService[];
}

/** POST /sandboxes's SandboxError for an image no source provides (control-plane.md §6). */
export function invalidImage(requested: string, supported: string[], message: string): ApiError {
  return new ApiError("bad_request", message, { details: { code: "INVALID_IMAGE", details: { requested_image: requested, supported_images: supported } } });
}

export function envOfImage(lines: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of lines) {
    const eq = line.indexOf("=");
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}

export function resolvedOf(image: StoredImage): ResolvedImage {
  const m = image.manifest;
  // The image's ENTRYPOINT/CMD starts after its services, as a process of the sandbox (entrypoint.ts).
  const entrypoint = entrypointService(m.config);
  return {
    ref: image.ref,
    layers: image.layers,
    env: envOfImage(m.config.env),
    workingDir: m.config.workingDir,
    user: m.config.user ?? "",
    services: entrypoint ? [...m.services, entrypoint] : m.services,
  };
}

/** GET /health's `defaultImage`: the build a simulator starts with (--prebuild), so a person knows why the first create waits. */
export interface PrebuildStatus {
  image: string;
  state: "building" | "ready" | "failed";
  /** What the build is doing now (while building), and its latest step within that (mmdebstrap's, npm's). */
  phase?: string;
  step?: string;
  startedAt: string;
  /** Since the start, or how long it took. */
  seconds: number;
  error?: string;
}

/**
 * What sandboxes' creates and starts ask of images (docs/images.md): a name checked at create, the image's
 * processes prepared at launch, the start-up build. SandboxImages serves it from the image store; HOST_ROOT
 * (--image-source host, or a records-only simulator) checks nothing and builds nothing.
 */
export interface SandboxImageSource {
  /** The image store behind sandbox images; undefined when sandboxes run on the host's root. */
  readonly store: ImageStore | undefined;
  check(image: string | undefined): Promise<void>;
  prepareLaunch(spec: LaunchSpec, image: string | undefined): Promise<ImageService[]>;
  prebuild(image: string, progress?: Progress): Promise<PrebuildStatus | undefined>;
  prebuildStatus(): PrebuildStatus | undefined;
  /** Ends a build under way (sandboxes waiting for it fail fast). */
  close(): Promise<void>;
}

/** Sandboxes on the host's root: any image name is accepted, none is built, an image brings no processes. */
export const HOST_ROOT: SandboxImageSource = {
  store: undefined,
  check: async () => {},
  prepareLaunch: async () => [],
  prebuild: async () => undefined,
  prebuildStatus: () => undefined,
  close: async () => {},
};

export class SandboxImages implements SandboxImageSource {
  private prebuilt: (Omit<PrebuildStatus, "seconds" | "startedAt"> & { started: number; finished?: number }) | undefined;

  constructor(
    readonly store: ImageStore,
    /** false: the launcher runs on the host's root (process) or runs images itself (docker); names are only checked. */
    private readonly buildForLaunch: boolean,
    private readonly logger?: Logger,
    /** What a build or export on first use is doing, per sandbox (its events). */
    private readonly onProgress?: (workspace: string, sandbox: string, text: string) => void,
    /** The launcher's reason why its sandboxes have one user id only (Launcher.singleUserId). */
    private readonly singleUserId?: () => string | undefined,
  ) {}

  /**
   * Builds (or finds) an image ahead of the first create, in the background: a create of that image meanwhile
   * joins this build. Nothing to do for a launcher that does not use image roots. Never throws.
   */
  async prebuild(image: string, progress: Progress = callbackProgress(() => {})): Promise<PrebuildStatus | undefined> {
    if (!this.buildForLaunch) return undefined;
    const state = (this.prebuilt = {
      image,
      state: "building" as PrebuildStatus["state"],
      started: Date.now(),
      phase: undefined as string | undefined,
      step: undefined as string | undefined,
      error: undefined as string | undefined,
      finished: undefined as number | undefined,
    });
    const tracking: Progress = {
      phase: (label) => {
        state.phase = label;
        state.step = undefined;
        progress.phase(label);
      },
      advance: (d, t) => progress.advance(d, t),
      note: (text) => {
        state.step = text.slice(0, 160);
        progress.note(text);
      },
    };
    try {
      await this.store.ensure(image, tracking);
      state.state = "ready";
    } catch (err) {
      state.state = "failed";
      state.error = (err as Error).message;
    }
    state.finished = Date.now();
    state.phase = state.step = undefined;
    return this.prebuildStatus();
  }

  /** The start-up build's state, if one was started. */
  close(): Promise<void> {
    return this.store.close();
  }

  prebuildStatus(): PrebuildStatus | undefined {
    const p = this.prebuilt;
    if (!p) return undefined;
    const { started, finished, ...shown } = p;
    return { ...shown, startedAt: new Date(started).toISOString(), seconds: Math.round(((finished ?? Date.now()) - started) / 100) / 10 };
  }

  /** The store as the image supply of launchers that run images in Docker engines (docker-supply.ts), progress in the sandbox's events. */
  dockerSupply(): ImageSupply {
    return dockerImageSupply(this.store, (workspace, sandbox, text) => this.onProgress?.(workspace, sandbox, text));
  }

  /** Throws INVALID_IMAGE when no source can provide the image; nothing is built. */
  async check(image: string | undefined): Promise<void> {
    const name = image || DEFAULT_SANDBOX_IMAGE;
    try {
      await this.store.locate(name);
    } catch (err) {
      if (err instanceof ImageNotFoundError) throw invalidImage(name, err.supported, err.message);
      if (err instanceof ImageRefError) throw invalidImage(name, this.store.supported(), `invalid image name: ${err.message}`);
      throw err;
    }
  }

  /**
   * Resolves the image of a launch into its spec: the root filesystem as imageRootDir, the image's
   * Env, WorkingDir and User (image-config.ts). Returns the processes the image starts beside the agent.
   */
  async prepareLaunch(spec: LaunchSpec, image: string | undefined): Promise<ImageService[]> {
    const resolved = await this.resolve(
      image,
      callbackProgress((text) => this.onProgress?.(spec.workspace, spec.sandbox, text)),
    );
    if (!resolved) return [];
    spec.imageRootDir = resolved.layers[0];
    spec.imageLowerDirs = resolved.layers.length > 1 ? resolved.layers.slice(1) : undefined;
    let applied;
    try {
      applied = applyImageConfig(spec, resolved, this.singleUserId?.());
    } catch (err) {
      if (err instanceof ImageUserError) throw new Error(`image ${resolved.ref}: ${err.message}`);
      throw err;
    }
    if (applied.notice) {
      this.logger?.warn({ workspace: spec.workspace, sandbox: spec.sandbox, image: resolved.ref }, applied.notice);
      this.onProgress?.(spec.workspace, spec.sandbox, applied.notice);
    }
    return resolved.services;
  }

  /** The image's root filesystem for a launch (built or exported first when needed); undefined when the launcher does not use one. */
  async resolve(image: string | undefined, progress: Progress): Promise<ResolvedImage | undefined> {
    if (!this.buildForLaunch) return undefined;
    const name = image || DEFAULT_SANDBOX_IMAGE;
    const stored = await this.store.ensure(name, progress);
    this.logger?.debug({ image: name, layers: stored.layers, digest: stored.manifest.digest }, "sandbox image resolved");
    return resolvedOf(stored);
  }
}

/** What the hub images' entrypoints ask of their services (hub/nextjs/entrypoint.sh): restarted when they fail, up to 25 times. */
const SERVICE_RESTARTS = 25;
/** How long a sandbox's start waits for a service's ports (ImageService.waitForPorts) before going on without them. */
const SERVICE_PORT_WAIT_S = 120;

/**
 * Starts the image's own processes beside the agent, as the hub images'
 * entrypoints do (hub/nextjs/entrypoint.sh: POST /process to the agent once
 * it answers), through the agent's endpoint whatever the launcher (a TCP
 * address, or the isolating launcher's Unix socket). A service already
 * running (an agent that restarted and adopted it) is left as it is.
 * Failures are reported, not thrown: the sandbox is up.
 */
export async function startImageServices(endpoint: AgentEndpoint, token: string, services: ImageService[], logger?: Logger): Promise<void> {
  if (services.length === 0) return;
  const onError = (service: string, message: string) => logger?.warn({ service, err: message }, "could not start the image's service");
  for (const service of services) {
    const waits = service.waitForPorts?.length ? { waitForPorts: service.waitForPorts, timeout: SERVICE_PORT_WAIT_S } : {};
    try {
      // Through endpoint.ts: under the isolating launcher the agent is a Unix socket, which fetch() cannot reach.
      const res = await agentFetch(endpoint, {
        method: "POST",
        path: "/process",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        // Services restart on failure as the hub entrypoints ask; the image's own entrypoint runs once, as a
        // container's PID 1 does (its end is reported, not retried).
        body: JSON.stringify({
          name: service.name,
          command: service.command,
          workingDir: service.workingDir,
          env: service.env,
          waitForCompletion: false,
          ...(service.name === ENTRYPOINT_PROCESS ? {} : { restartOnFailure: true, maxRestarts: SERVICE_RESTARTS }),
          ...waits,
        }),
        timeoutMs: waits.waitForPorts ? (SERVICE_PORT_WAIT_S + 10) * 1000 : 10_000,
      });
      if (res.status === 409) continue; // its name is running: started before this agent (re)started
      if (res.status < 200 || res.status >= 300) onError(service.name, `POST /process answered ${res.status}: ${res.text.slice(0, 200)}`);
      else if (service.name === ENTRYPOINT_PROCESS) followEntrypoint(endpoint, token, logger);
    } catch (err) {
      onError(service.name, (err as NodeJS.ErrnoException).code ?? (err as Error).message);
    }
  }
}

/**
 * A template's entrypoint should never end (it `wait`s on sandbox-api): when it does, say so. Its log
 * stream ends when it ends (or when the agent stops: then the record still reads running, or cannot be read).
 */
function followEntrypoint(endpoint: AgentEndpoint, token: string, logger?: Logger): void {
  const headers = { authorization: `Bearer ${token}` };
  const req = agentRequest(endpoint, { method: "GET", path: `/process/${ENTRYPOINT_PROCESS}/logs/stream`, headers });
  req.once("error", () => {});
  req.once("response", (res) => {
    res.once("error", () => {});
    res.resume();
    res.once("end", () => {
      agentFetch(endpoint, { path: `/process/${ENTRYPOINT_PROCESS}`, headers, timeoutMs: 5_000 })
        .then((reply) => {
          const record = JSON.parse(reply.text) as { status?: string; exitCode?: number };
          if (reply.status !== 200 || record.status === "running") return;
          logger?.warn(
            { status: record.status, exitCode: record.exitCode },
            `the image's entrypoint ended (its output: sandbox.process.logs("${ENTRYPOINT_PROCESS}")); the sandbox keeps running here, while on the platform a template whose entrypoint ends fails: end it with \`wait\``,
          );
        })
        .catch(() => {}); // the agent stopped with the sandbox: nothing to say
    });
  });
  req.end();
}
