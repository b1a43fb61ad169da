import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Clock } from "../../src/clock.js";
import type { Logger } from "../../src/logging.js";
import { agentFetch, type AgentEndpoint } from "../launcher/endpoint.js";
import { removeTree, type AgentHandle, type LaunchSpec, type Launcher } from "../launcher/types.js";
import { entrypointService, ENTRYPOINT_PROCESS } from "../images/entrypoint.js";
import type { ImageService } from "../images/recipes.js";
import { startImageServices, type SandboxImageSource } from "../images/sandbox-images.js";
import type { ResourceStore } from "../store/resources.js";
import { activeCompute, recordApplicationStatus, type ActiveCompute } from "./app-status.js";
import { runsOwnCompute, type ApplicationWorkloads } from "./workloads.js";

/**
 * Applications run for real, as the platform's application runtime runs them: the active revision's image
 * started as a workload of the simulator's launcher (the same isolated machine a sandbox gets, its agent only
 * the vehicle: it leaves the daemon's port free, so the application may listen on 8080), the image's
 * ENTRYPOINT/CMD run in it with the revision's envs and PORT (spec.port, default 8080, as ApplicationSpec
 * says), DEPLOYING until something answers on that port, then DEPLOYED; FAILED with the program's last lines
 * when it exits, or when it never listens within the listen timeout. Its URL (metadata.url) reaches the port
 * (app-proxy.ts). A new revision replaces the running one; disabling or deleting it stops it.
 */

export interface ApplicationRunnerOptions {
  launcher: Launcher;
  /** Where applications' files live while they run (<dir>/applications/...). */
  dir: string;
  images: SandboxImageSource;
  deps: { resources: ResourceStore; clock: Clock; logger: Logger };
  logLevel?: string;
  /** How long an application may take to answer on its port before it is FAILED (default 120 s). */
  listenTimeoutMs?: number;
}

/** The name of the application's program among its agent's processes. */
export const APPLICATION_PROCESS = "application";
const DEFAULT_LISTEN_TIMEOUT_MS = 120_000;
const POLL_MS = 500;
/** Lines of the program's output a FAILED event carries. */
const LAST_LINES = 20;

/** One running (or starting) application. */
export interface RunningApplication {
  workspace: string;
  name: string;
  revision: string;
  port: number;
  token: string;
  handle?: AgentHandle;
  stopped: boolean;
  /** Settles once the workload is gone (its processes ended, its files removed). */
  ended: Promise<void>;
}

/** Launchers whose agent listens on 8080 inside the container (docker-args.ts AGENT_PORT): an application cannot take it there. */
const CONTAINER_LAUNCHERS = new Set(["docker", "swarm"]);
const CONTAINER_AGENT_PORT = 8080;

/** What an application's machine is called among the launcher's (LaunchSpec.sandbox): its name and this. */
const LAUNCH_SUFFIX = ".app";
/** The application a launch is for (the image source's progress names the launch), or undefined for a sandbox's. */
export const applicationOfLaunch = (sandbox: string) => (sandbox.endsWith(LAUNCH_SUFFIX) ? sandbox.slice(0, -LAUNCH_SUFFIX.length) : undefined);

const keyOf = (workspace: string, name: string) => `${workspace}/${name}`;

export class ApplicationRunner implements ApplicationWorkloads {
  readonly runs = true;
  private readonly apps = new Map<string, RunningApplication>();
  /** Per application: the stop of the previous workload a new one waits for. */
  private readonly stopping = new Map<string, Promise<void>>();

  constructor(private readonly options: ApplicationRunnerOptions) {}

  /** The running application behind a URL (app-proxy.ts), once it is DEPLOYED or while it starts. */
  get(workspace: string, name: string): RunningApplication | undefined {
    return this.apps.get(keyOf(workspace, name));
  }

  runsRevision(workspace: string, name: string, revision: string | undefined): boolean {
    const app = this.get(workspace, name);
    return !!app && !app.stopped && app.revision === revision;
  }

  deploy(workspace: string, name: string): void {
    const compute = activeCompute(this.options.deps.resources, workspace, name);
    if (!compute) return;
    const previous = this.stop(workspace, name);
    const app: RunningApplication = {
      workspace,
      name,
      revision: compute.revision,
      port: compute.port,
      token: randomBytes(24).toString("base64url"),
      stopped: false,
      ended: Promise.resolve(),
    };
    this.apps.set(keyOf(workspace, name), app);
    app.ended = previous
      .then(() => this.run(app, compute))
      .catch((err: Error) => this.options.deps.logger.error({ workspace, application: name, err: err.message }, "application runner failed"));
  }

  async stop(workspace: string, name: string): Promise<void> {
    const key = keyOf(workspace, name);
    const app = this.apps.get(key);
    if (app) {
      app.stopped = true;
      this.apps.delete(key);
      const done = app.handle ? app.handle.stop(5_000).then(() => undefined) : Promise.resolve();
      const stopped: Promise<void> = Promise.all([done, app.ended]).then(() => {
        if (this.stopping.get(key) === stopped) this.stopping.delete(key);
      });
      this.stopping.set(key, stopped);
    }
    await this.stopping.get(key);
  }

  async stopWorkspace(workspace: string): Promise<void> {
    await Promise.all([...this.apps.values()].filter((a) => a.workspace === workspace).map((a) => this.stop(a.workspace, a.name)));
  }

  /** Simulator stop: every application's workload ends (their records keep their status: a restart with --data starts them again). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.apps.values()].map((a) => this.stop(a.workspace, a.name)));
  }

  /** A restart with --data: the applications that were deployed (or deploying) run again. */
  recover(workspaces: string[]): void {
    for (const workspace of workspaces) {
      for (const item of this.options.deps.resources.allOfKind(workspace, ["application"])) {
        if ((item.status !== "DEPLOYED" && item.status !== "DEPLOYING") || !runsOwnCompute(item.doc as { spec: Record<string, unknown> })) continue;
        recordApplicationStatus(this.options.deps, workspace, item.name, "DEPLOYING", "the simulator restarted: starting the application again");
        this.deploy(workspace, item.name);
      }
    }
  }

  private status(app: RunningApplication, status: string, message: string): void {
    // A replaced or stopped workload no longer speaks for the record.
    if (app.stopped || this.get(app.workspace, app.name) !== app) return;
    recordApplicationStatus(this.options.deps, app.workspace, app.name, status, message, app.revision);
  }

  private async run(app: RunningApplication, compute: ActiveCompute): Promise<void> {
    if (app.stopped) return;
    const launcher = this.options.launcher;
    const base = join(this.options.dir, "applications", app.workspace, app.name);
    removeTree(base, launcher);
    mkdirSync(base, { recursive: true });
    const spec: LaunchSpec = {
      workspace: app.workspace,
      // Not a sandbox name (those have no "."): nothing of a sandbox of the same name is touched.
      sandbox: `${app.name}${LAUNCH_SUFFIX}`,
      rootDir: join(base, "root"),
      dataDir: join(base, "agent"),
      token: app.token,
      env: { ...compute.env, PORT: String(app.port) },
      image: compute.image,
      memoryMb: compute.memory,
      logLevel: this.options.logLevel,
      inSandboxApi: false,
    };
    try {
      const services = await this.options.images.prepareLaunch(spec, compute.image);
      const program = services.find((s) => s.name === ENTRYPOINT_PROCESS) ?? this.storedEntrypoint(compute.image);
      if (!program) throw new Error(`image ${compute.image} has no ENTRYPOINT or CMD: the application has nothing to run`);
      // A sandbox image (ImageInstance.build adds ENTRYPOINT ["/usr/local/bin/sandbox-api"]): on the platform the
      // daemon is what answers on 8080; here the agent is that daemon, so it keeps its in-sandbox port.
      if (runsSandboxApi(program)) delete spec.inSandboxApi;
      else if (app.port === CONTAINER_AGENT_PORT && CONTAINER_LAUNCHERS.has(launcher.name))
        throw new Error(
          `the ${launcher.name} launcher's agent listens on port ${CONTAINER_AGENT_PORT} in the application's container: give the application another spec.port (its program gets it as PORT)`,
        );
      if (app.stopped) return;
      app.handle = await launcher.start(spec);
      if (app.stopped) return void (await app.handle.stop(5_000));
      await startImageServices(
        app.handle,
        app.token,
        services.filter((s) => s !== program),
      );
      await this.startProgram(app, program);
      this.status(app, "DEPLOYING", `deploying: ${program.command.replace(/^exec /, "")} started, waiting for port ${app.port}`);
      await this.untilListening(app);
      this.status(app, "DEPLOYED", `deployed: answering on port ${app.port}`);
      await this.untilEnded(app);
    } catch (err) {
      const lines = app.handle ? await lastLines(app.handle, app.token) : "";
      this.options.deps.logger.warn({ workspace: app.workspace, application: app.name, err: (err as Error).message }, "application failed");
      this.status(app, "FAILED", `failed: ${(err as Error).message}${lines ? `\n${lines}` : ""}`);
      if (this.get(app.workspace, app.name) === app) {
        app.stopped = true;
        this.apps.delete(keyOf(app.workspace, app.name));
      }
    } finally {
      await app.handle?.stop(5_000);
      removeTree(base, launcher);
    }
  }

  /** Where the launcher does not lay the image out itself (docker, process), its ENTRYPOINT/CMD from the image store. */
  private storedEntrypoint(image: string): ImageService | undefined {
    const stored = this.options.images.store?.get(image);
    return stored ? entrypointService(stored.manifest.config) : undefined;
  }

  private async startProgram(app: RunningApplication, program: ImageService): Promise<void> {
    const reply = await agentFetch(app.handle!, {
      method: "POST",
      path: "/process",
      headers: { authorization: `Bearer ${app.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: APPLICATION_PROCESS, command: program.command, workingDir: program.workingDir, env: program.env, waitForCompletion: false }),
      timeoutMs: 30_000,
    });
    if (reply.status < 200 || reply.status >= 300) throw new Error(`the application's program did not start (${reply.status}): ${reply.text.slice(0, 300)}`);
  }

  private async untilListening(app: RunningApplication): Promise<void> {
    const deadline = Date.now() + (this.options.listenTimeoutMs ?? DEFAULT_LISTEN_TIMEOUT_MS);
    while (!app.stopped) {
      await this.checkRunning(app);
      if (await listening(app.handle!, app.token, app.port)) return;
      if (Date.now() > deadline)
        throw new Error(`nothing answered on port ${app.port} within ${Math.round((this.options.listenTimeoutMs ?? DEFAULT_LISTEN_TIMEOUT_MS) / 1000)} s`);
      await sleep(POLL_MS);
    }
  }

  private async untilEnded(app: RunningApplication): Promise<void> {
    while (!app.stopped) {
      await this.checkRunning(app);
      await Promise.race([sleep(POLL_MS * 2), app.handle!.exited]);
    }
  }

  /** Throws when the program (or its whole environment) has ended. */
  private async checkRunning(app: RunningApplication): Promise<void> {
    if (app.stopped) return;
    const exited = await Promise.race([app.handle!.exited, sleep(0).then(() => undefined)]);
    if (exited) throw new Error(`the application's environment stopped (${exited.signal ?? `exit code ${exited.code}`})`);
    const reply = await agentFetch(app.handle!, {
      method: "GET",
      path: `/process/${APPLICATION_PROCESS}`,
      headers: { authorization: `Bearer ${app.token}` },
      timeoutMs: 10_000,
    });
    const body = JSON.parse(reply.text || "{}") as { status?: string; exitCode?: number };
    if (reply.status === 200 && body.status !== "running")
      throw new Error(`the application's program exited (${body.status}, exit code ${body.exitCode ?? "none"})`);
  }
}

/** Whether the program is the platform's sandbox daemon (`sandbox-api`, whatever its directory). */
export function runsSandboxApi(program: ImageService): boolean {
  const first = program.command.replace(/^exec /, "").split(" ")[0] ?? "";
  return /(^|\/)sandbox-api'?$/.test(first.replace(/^'/, ""));
}

/** Whether a server answers on `port` inside the workload: a connection it accepts (or, without one, the agent's /port/{n}). */
async function listening(handle: AgentHandle, token: string, port: number): Promise<boolean> {
  if (handle.openPort) {
    return handle.openPort(port).then(
      (socket) => (socket.destroy(), true),
      () => false,
    );
  }
  const reply = await agentFetch(handle, { method: "GET", path: `/port/${port}/`, headers: { authorization: `Bearer ${token}` }, timeoutMs: 10_000 }).catch(
    () => undefined,
  );
  return !!reply && reply.status !== 502;
}

/** The program's last lines of output (its logs), for a FAILED event. */
async function lastLines(endpoint: AgentEndpoint, token: string): Promise<string> {
  try {
    const reply = await agentFetch(endpoint, {
      method: "GET",
      path: `/process/${APPLICATION_PROCESS}/logs`,
      headers: { authorization: `Bearer ${token}` },
      timeoutMs: 5_000,
    });
    if (reply.status !== 200) return "";
    const body = JSON.parse(reply.text) as { logs?: string; stdout?: string; stderr?: string };
    const text = body.logs ?? `${body.stdout ?? ""}${body.stderr ?? ""}`;
    return text.trimEnd().split("\n").slice(-LAST_LINES).join("\n");
  } catch {
    return "";
  }
}
