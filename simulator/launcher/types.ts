import { rmSync } from "node:fs";
/**
 * The launcher interface: how the simulator gets a running sandbox-agent for a
 * sandbox, whatever isolates it (a child process, a bubblewrap namespace, a
 * container, a Kubernetes pod). Everything else (proxy, lifecycle, schedules)
 * only ever sees an AgentHandle's endpoint and exit. See docs/launchers.md.
 */
import type { Socket } from "node:net";
import type { AgentEndpoint } from "./endpoint.js";
import type { SandboxEgressSpec } from "./gateway.js";

export interface LaunchSpec {
  workspace: string;
  sandbox: string;
  /** Host directory that is the sandbox's filesystem (`/` inside an isolating launcher). */
  rootDir: string;
  /** Host directory for the agent's own state (database, upload parts, process logs). */
  dataDir: string;
  /** The per-sandbox secret the agent requires as `Authorization: Bearer <token>`. */
  token: string;
  /** The sandbox's environment (spec.runtime.envs), inherited by every process it runs. */
  env?: Record<string, string>;
  /** spec.runtime.image: used by launchers that run images (docker, kubernetes). */
  image?: string;
  /** Host directory holding the workspace's drives (drive N is <drivesDir>/N), shared between sandboxes. */
  drivesDir?: string;
  /** The agent's --log-level (default warn). */
  logLevel?: string;
  /**
   * The image's root filesystem on the host, read-only and shared by every sandbox made from it
   * (the overlay's lower layer; rootDir is then the sandbox's own writable layer). Resolved by the
   * image store before the launch; undefined = the launcher's own choice (the host's root).
   */
  imageRootDir?: string;
  /**
   * The layers under imageRootDir, top first, when the image is stacked over others (a template over its
   * base image: imageRootDir then holds only the template's own changes, deletions as overlay whiteouts).
   */
  imageLowerDirs?: string[];
  /** Host directories mounted into the sandbox (spec.volumes: the volume's directory at its mountPath). */
  mounts?: SandboxMount[];
  /** spec.runtime.memory in MB: the sandbox's memory limit where the launcher can enforce one. */
  memoryMb?: number;
  /** Outbound network from inside the sandbox (default true where the launcher gives it a network of its own). */
  outboundNetwork?: boolean;
  /** The sandbox path commands start in when they name none (the image's WorkingDir); default `/`. */
  workingDir?: string;
  /** The simulator's egress (simulator/egress): its address inside the sandbox and the CA to trust; only for launchers with `egress`. */
  egress?: SandboxEgressSpec;
  /**
   * false: the agent leaves the platform daemon's port (8080) free inside the sandbox, for a workload whose own
   * server listens there (an application). Default true (isolating launchers: the agent answers there too).
   */
  inSandboxApi?: boolean;
  /** Who commands run as (the image's User, resolved in its /etc/passwd); default root. Applied by launchers that run images (usesImageRoot). */
  user?: ProcessUser;
}

export interface ProcessUser {
  uid: number;
  gid: number;
  /** Supplementary group ids. */
  groups: number[];
}

export interface SandboxMount {
  /** Host path of what is mounted. */
  source: string;
  /** Absolute path inside the sandbox. */
  target: string;
  readOnly: boolean;
}

export interface AgentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Last lines the agent wrote to stderr, for the crash event. */
  stderr: string;
}

export interface AgentHandle extends AgentEndpoint {
  /**
   * Where the agent answers: a TCP URL (e.g. http://127.0.0.1:41234), or, with
   * socketPath set, the Unix socket bound out of the sandbox (url is then nominal).
   * Talk to it through endpoint.ts (agentRequest/agentFetch), never fetch(url).
   */
  url: string;
  /** Where the sandbox runs, for its events, where a launcher places sandboxes on several machines ("on node worker-1"). */
  placement?: string;
  /** Host pid of the agent (or of its isolating wrapper) when there is one. */
  pid?: number;
  /** Host pid of the sandbox's first process (its PID namespace's init) under an isolating launcher. */
  sandboxPid?: number;
  /**
   * A connection to port n inside the sandbox, for a launcher that can give one (optional: the
   * proxy otherwise goes through the agent's /port/{n}). The proxy then speaks HTTP to the
   * in-sandbox server itself, one hop instead of two. Rejects with PortRefused
   * (port-handoff.ts) when nothing listens there, with any other error when the sandbox cannot
   * be asked (503). bwrap: the agent connects inside the sandbox's network and hands the socket
   * over its IPC channel; process: the simulator connects itself (the sandbox shares the host's
   * network); docker: none. A Kubernetes launcher could dial the pod's IP.
   */
  openPort?(port: number): Promise<Socket>;
  /**
   * Attaches or removes the sandbox's direct outbound network (bwrap: slirp4netns) while it runs: without
   * it, the egress proxy is the sandbox's only way out, so plain TCP to a destination its policy blocks is
   * refused. Optional: launchers without a network of their own cannot.
   */
  setDirectOutbound?(on: boolean): Promise<void>;
  /**
   * Standby (Launcher.standby): stops every process of the sandbox, the agent included, where they are (same
   * pids, same memory), and lets them go on. Resolve once the whole sandbox is stopped or running again.
   * Optional: a launcher without a sandbox of its own to stop (process) has neither.
   */
  freeze?(): Promise<void>;
  thaw?(): Promise<void>;
  /** Settles once the agent has exited, however that happened. Never rejects. */
  exited: Promise<AgentExit>;
  /** SIGTERM (the agent drains and closes its database), then SIGKILL after the grace period. */
  stop(graceMs?: number): Promise<AgentExit>;
}

/** What /health and the start-up log say about a launcher: does it isolate sandboxes, and how. */
export interface LauncherDescription {
  launcher: string;
  isolated: boolean;
  detail: string;
  /** Whether every user id exists in a sandbox (subordinate ids), and how they map. */
  userIds?: { all: boolean; detail: string };
  /** Who serves an isolated sandbox's agent API: the simulator's agent host, or an agent process in each sandbox (and why). */
  agents?: { mode: "host" | "process"; reason?: string };
}

export interface Launcher {
  readonly name: string;
  /** What it isolates (describeLauncher: a launcher without it is "a custom launcher", not isolated). */
  describe?(): LauncherDescription;
  /**
   * The user ids a sandbox gets (bwrap: a block of subordinate ids, id-map.ts), for the directory `owner`:
   * "single" when only the simulator's own id can be had, and why.
   */
  mapIds?(owner?: string): { kind: "range" | "single"; reason?: string };
  /**
   * True when the launcher lays each sandbox over LaunchSpec.imageRootDir (an isolating launcher with an
   * overlay): the simulator then resolves spec.runtime.image to a root filesystem before each start (building
   * or exporting it on first use). Otherwise images are only checked by name (docs/images.md).
   */
  readonly usesImageRoot?: boolean;
  /**
   * Why a sandbox here has one user id only (its root, mapped to the simulator's own user), or undefined
   * when every id exists in it: an image's User other than root can only be applied in the latter case.
   */
  singleUserId?(): string | undefined;
  /**
   * Whether idle sandboxes can go to standby here (their handles have freeze/thaw): true, or why not
   * (said once at start and in /health; such sandboxes never sleep).
   */
  readonly standby?: true | string;
  /** True when a sandbox's traffic can be made to pass the simulator's egress proxy (its own network namespace: LaunchSpec.egress). */
  readonly egress?: boolean;
  /** Starts an agent for the sandbox; resolves once it answers GET /health. */
  start(spec: LaunchSpec): Promise<AgentHandle>;
  /** Gets ready for sandboxes like `spec` (e.g. starts a warm one) before the first is created; optional. */
  prepare?(spec: LaunchSpec): void;
  /** The sandboxes started ahead of need (a warm pool): how many it keeps, how many wait now, and their pids (memory in /health). */
  warmPool?(): WarmPoolState;
  /**
   * Where the images of its sandboxes come from when its Docker engines lack them (docker, swarm): the
   * simulator's image store (hub images built, stored images, templates), given once at start.
   */
  useImages?(supply: ImageSupply): void;
  /** The machines sandboxes run on and how many each runs (swarm: its nodes, their state), for /health. */
  nodes?(): LauncherNode[];
  /** Releases what the launcher holds beyond running agents (e.g. warm agents); running agents are stopped through their handles. */
  close?(): Promise<void>;
  /**
   * Removes a directory its sandboxes wrote into, files owned by any of their
   * user ids included (as a normal user, ids of a subordinate block the
   * simulator's user cannot remove directly); optional: rmSync otherwise.
   */
  removeTree?(path: string): void;
  /**
   * Copies a directory its sandboxes wrote into (`target` must not exist) with every file's owner among their
   * user ids; optional: the simulator copies it itself otherwise.
   */
  copyTree?(source: string, target: string): Promise<void>;
}

/** rm -rf of a sandbox's (or a task's) directory, through the launcher where it owns ids the simulator's user does not. */
export function removeTree(path: string, launcher?: Pick<Launcher, "removeTree">): void {
  if (launcher?.removeTree) launcher.removeTree(path);
  else rmSync(path, { recursive: true, force: true });
}

export interface LauncherNode {
  name: string;
  /** ready | down | disconnected | unknown */
  state: string;
  role: string;
  address: string;
  /** This simulator's sandboxes running there. */
  sandboxes: number;
  /** Whether the simulator reaches the node's own engine (swarm: standby and a policy's cut of direct outbound go through it), or why not. */
  engine?: { reachable: true; via: string } | { reachable: false; why: string };
}

/** The engine a launcher asks for an image: a way to run its docker CLI, and who it is (errors, events). */
export interface ImageTarget {
  workspace: string;
  sandbox: string;
  /** The CLI's environment for that engine (DOCKER_HOST...). */
  env: NodeJS.ProcessEnv;
  /** "this host", or a swarm node's hostname. */
  node: string;
}

export interface ImageSupply {
  /**
   * Makes `image` present in the target engine: nothing when it has it (the store's own copy, or an image the
   * user put there), else imported from the image store (built first for a hub image), progress in the
   * sandbox's events. Throws with the reason, naming the image and the engine.
   */
  provide(image: string, target: ImageTarget): Promise<void>;
}

export interface WarmPoolState {
  size: number;
  idle: number;
  /** Host pids of the idle warm sandboxes' top processes (their descendants count too). */
  pids: number[];
}

export { LaunchError } from "./gateway.js";
