import { closeSync, constants, openSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import type { Logger } from "../../src/logging.js";
import { listenOnDescriptor, listenSocket, type Serving } from "../../src/serve.js";
import { openAgent, type AgentRuntime } from "../../sandbox-agent/agent.js";
import { createApp } from "../../sandbox-agent/app.js";
import { parseAgentConfig, type AgentConfig } from "../../sandbox-agent/config.js";
import { describeExit, outputTail, run } from "../../sandbox-agent/drives/run.js";
import { markedInSandbox } from "../../sandbox-agent/http/in-sandbox-port.js";
import { O_PATH } from "../../sandbox-agent/paths/beneath.js";
import { openat2Sync, resolveFlags } from "../../sandbox-agent/paths/openat2.js";
import type { RootDescriptor } from "../../sandbox-agent/paths/sandbox-path.js";
import { namespaceSpawner, type NamespaceTarget } from "../../sandbox-agent/process/ns-spawn.js";
import type { SearchPool } from "../../sandbox-agent/search/pool.js";
import { UpgradeState } from "../../sandbox-agent/system/upgrade.js";
import { boundRequests, type RequestBounds } from "./bounds.js";
import { NetNamespace } from "./netns.js";
import { sandboxTerminal } from "./pty.js";

/**
 * One sandbox's agent inside the agent host: the sandbox-agent's own modules (openAgent + createApp, as the
 * standalone daemon composes them), over that sandbox's own database, process table, schedules, drives and
 * secrets key in its data dir, serving from outside it:
 * - its files resolved by the kernel inside the sandbox's view of its root (`/proc/<pid1>/root` held as a
 *   descriptor; openat2 with RESOLVE_IN_ROOT, whatever links the sandbox makes);
 * - its commands and terminals entered into the sandbox's namespaces through nsexec;
 * - its API on a Unix socket in its data dir (where the simulator reaches every sandbox's agent), and on
 *   `localhost:8080` inside the sandbox for the sandbox's own processes (a socket made in its network namespace).
 */

export interface HostedSandbox {
  sandbox: string;
  token: string;
  /** Host directory of the agent's state (never visible inside the sandbox). */
  dataDir: string;
  /** Where the simulator reaches this agent (a Unix socket on the host). */
  socketPath: string;
  /** The sandbox's PID 1, its cgroup, its commands' capabilities and user. */
  target: NamespaceTarget;
  /** The environment its commands start with (the image's and the spec's, never the simulator's). */
  env: NodeJS.ProcessEnv;
  /** The image's WorkingDir (sandbox path). */
  workingDir?: string;
  logLevel?: string;
  /** Host path of the sandbox cgroup's memory.events (OOM kills are reported as such). */
  memoryEvents?: string;
  /** Port of the API inside the sandbox (8080 as the platform's daemon), without a token. */
  inSandboxPort?: number;
  /** The workspace's drives: their directory inside the sandbox, and mount(8)/umount(8) as run in the sandbox. */
  drives?: { sandboxDir: string; mount: string[]; umount: string[] };
}

export interface InstanceDeps {
  logger: Logger;
  search: SearchPool;
  bounds: RequestBounds;
  /** The nsexec helper's path (native/nsexec). */
  nsexec: string;
}

export interface HostedAgent {
  readonly socketPath: string;
  /** A connection to a port inside the sandbox (rejects with code ECONNREFUSED when nothing listens). */
  openPort(port: number): Promise<Socket>;
  /** Listens on address:port inside the sandbox and hands each connection to `accept` (the egress gateways). */
  listenInside(address: string, port: number, accept: (socket: Socket) => void): Promise<void>;
  /** Stops serving (requests in flight get `graceMs`) and closes the agent's state; the sandbox's processes are not touched. */
  close(graceMs?: number): Promise<void>;
}

/** What the agent config is parsed from: the standalone agent's own options, so both read the same defaults. */
function configOf(spec: HostedSandbox, drivesDir: string | undefined): AgentConfig {
  const argv = [
    "--root",
    "/",
    "--data-dir",
    spec.dataDir,
    "--sandbox-name",
    spec.sandbox,
    "--log-level",
    spec.logLevel ?? "warn",
    "--confinement",
    "openat2",
    // The platform's metadata document is the sandbox's, read by its daemon inside; the host never reads a path the
    // sandbox controls by name, so /environment/reload reads one in the agent's own state (none: nothing to overlay).
    "--metadata-path",
    join(spec.dataDir, "bl-metadata"),
    ...(spec.workingDir ? ["--working-dir", spec.workingDir] : []),
    ...(spec.memoryEvents ? ["--memory-events", spec.memoryEvents] : []),
    // Of the backends, bind is the one for a root held as a descriptor (symlink links by host path:
    // paths/sandbox-path.ts requireHostLinks); its mount(8) runs in the sandbox's mount namespace.
    "--drive-backend",
    "bind",
  ];
  if (drivesDir && spec.drives) {
    argv.push("--drives-dir", drivesDir, "--drives-existing-only");
    argv.push("--mount-program", JSON.stringify(spec.drives.mount), "--umount-program", JSON.stringify(spec.drives.umount));
  }
  const env: NodeJS.ProcessEnv = { SANDBOX_AGENT_TOKEN: spec.token };
  for (const key of ["BL_DISABLE_KEEPALIVE", "DISABLE_TERMINAL"]) if (spec.env[key] !== undefined) env[key] = spec.env[key];
  const config = parseAgentConfig(argv, env);
  if (config === "help") throw new Error("unreachable: no --help");
  return config;
}

export async function openHostedAgent(spec: HostedSandbox, deps: InstanceDeps): Promise<HostedAgent> {
  const held: number[] = [];
  const netns = new NetNamespace(spec.target.pid);
  const servers: Serving[] = [];
  const gateways: Server[] = [];
  let runtime: AgentRuntime | undefined;
  try {
    const rootFd = openSync(`/proc/${spec.target.pid}/root`, O_PATH | constants.O_DIRECTORY);
    held.push(rootFd);
    const root: RootDescriptor = { fd: rootFd, label: `/proc/${spec.target.pid}/root`, mountinfo: `/proc/${spec.target.pid}/mountinfo` };
    const flags = resolveFlags();
    const inRoot = flags.IN_ROOT | flags.NO_MAGICLINKS;
    // The drives' directory as the sandbox has it mounted, held from the start (nothing of the sandbox has run
    // yet): a bind mount's source must be in the sandbox's mount namespace, and a link made there later changes
    // nothing. Then covered, so that the sandbox's processes see the drives they mount, not every drive.
    let drivesDir: string | undefined;
    if (spec.drives) {
      const fd = openat2Sync(rootFd, spec.drives.sandboxDir, O_PATH | constants.O_DIRECTORY, inRoot | flags.NO_SYMLINKS);
      held.push(fd);
      drivesDir = `/proc/self/fd/${fd}`;
      await coverDrives(spec.drives);
    }
    const exists = (path: string) => {
      try {
        closeSync(openat2Sync(rootFd, path, O_PATH, inRoot));
        return true;
      } catch {
        return false;
      }
    };
    const config = configOf(spec, drivesDir);
    const upgrades = new UpgradeState();
    const overrides = {
      logger: deps.logger.child({ sandbox: spec.sandbox }),
      root,
      spawner: namespaceSpawner(() => spec.target, deps.nsexec),
      terminalEntry: { exists, open: sandboxTerminal(rootFd, () => spec.target, deps.nsexec) },
      baseEnv: spec.env,
      search: deps.search,
      upgrades,
    };
    runtime = await openAgent(config, overrides);
    let app = createApp(runtime.deps);
    const handler = boundRequests(
      (req, res) => app(req, res),
      (req, socket, head) => (app.onUpgrade ? app.onUpgrade(req, socket, head) : socket.destroy()),
      deps.bounds,
    );
    servers.push(await listenSocket(handler, spec.socketPath, { maxConnections: deps.bounds.maxConnections }));
    if (spec.inSandboxPort !== undefined) {
      const fd = await netns.listen("127.0.0.1", spec.inSandboxPort);
      servers.push(
        await listenOnDescriptor(markedInSandbox(handler), fd, `http://127.0.0.1:${spec.inSandboxPort}`, { maxConnections: deps.bounds.maxConnections }),
      );
    }
    // POST /upgrade: the code is the host's, so an upgrade is a fresh instance over the same state (the reference
    // replaces its binary and keeps its processes: here they are adopted by the new instance's recovery).
    upgrades.trigger = (version) => {
      upgrades.last = { status: "running", step: "restarting", version, lastAttempt: new Date().toISOString() };
      void (async () => {
        const old = runtime!;
        old.deps.processes.close(true);
        await old.close();
        runtime = await openAgent(config, overrides);
        app = createApp(runtime.deps);
        upgrades.count++;
        upgrades.last = { ...upgrades.last, status: "completed", step: "done" };
      })().catch((err: unknown) => {
        upgrades.last = { ...upgrades.last, status: "failed", step: "restarting", error: (err as Error).message };
        deps.logger.error({ err, sandbox: spec.sandbox }, "agent instance upgrade failed");
      });
    };
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop(0)));
    await runtime?.close();
    held.forEach((fd) => closeSync(fd));
    netns.close();
    throw err;
  }

  let closing: Promise<void> | undefined;
  return {
    socketPath: spec.socketPath,
    openPort: (port) => netns.connect("127.0.0.1", port),
    async listenInside(address, port, accept) {
      const fd = await netns.listen(address, port);
      const server = createServer(accept);
      server.on("error", () => server.close());
      await new Promise<void>((resolve) => server.listen({ fd }, resolve));
      gateways.push(server);
    },
    close(graceMs = 2_000) {
      closing ??= (async () => {
        gateways.forEach((g) => g.close());
        const stopped = Promise.all(servers.map((s) => s.stop(graceMs)));
        runtime!.deps.processes.close();
        await stopped;
        await runtime!.close();
        held.forEach((fd) => closeSync(fd));
        netns.close();
      })();
      return closing;
    },
  };
}

/**
 * Covers the workspace's drives directory inside the sandbox with an empty read-only tmpfs, once it is held (the
 * source of every drive the instance mounts) and before any process of the sandbox runs: a drive's permissions would
 * mean nothing if every drive were readable there. Commands cannot unmount it: they hold COMMAND_CAPABILITIES, no
 * CAP_SYS_ADMIN. (An agent inside, `--agent-mode process`, needs the directory in its own view, so there it stays.)
 */
async function coverDrives(drives: NonNullable<HostedSandbox["drives"]>): Promise<void> {
  const covered = await run([...drives.mount, "-t", "tmpfs", "-o", "ro,nosuid,nodev,noexec,size=4k,mode=0555", "sandbox-drives", drives.sandboxDir]);
  if (covered.code !== 0) throw new Error(`could not cover the drives directory inside the sandbox: mount ${describeExit(covered)}: ${outputTail(covered)}`);
}
