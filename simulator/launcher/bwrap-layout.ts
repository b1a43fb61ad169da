import { existsSync, mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { agentArgs, agentEnv } from "./agent-main.js";
import { TOKEN_HANDOFF } from "./docker-args.js";
import { readBundle, trustInImage, writeTrustFiles } from "./egress-trust.js";
import type { SandboxEgressSpec } from "./gateway.js";
import { SANDBOX_RESOLV_CONF } from "./network.js";
import { wrapperAs } from "./process-user.js";
import type { SandboxKit } from "./sandbox-kit.js";
import type { MemoryCgroup } from "./cgroup.js";
import { hostExtraCertificates, hostsFile, imageFile, imageLayers, SANDBOX_CA_BUNDLE } from "./sandbox-setup.js";
import { LaunchError, type LaunchSpec } from "./types.js";

/**
 * What an isolated (bwrap) sandbox is made of, before any process starts: the paths its agent finds inside, its
 * `/` (the image's overlay or the host's system read-only), its resolver and hosts files, the egress CA it
 * trusts, and its agent's command line and environment. The launcher (bwrap.ts) spawns the chain from these.
 */

/** Inside the sandbox: the agent's state (and its socket), the workspace's drives, the memory cgroup's OOM counter. */
export const AGENT_DATA = "/run/sandbox-agent";
export const AGENT_SOCKET = `${AGENT_DATA}/agent.sock`;
export const DRIVES = "/run/sandbox-drives";
export const MEMORY_EVENTS = "/run/sandbox-memory/events";
/** The platform's daemon listens on 8080 inside every sandbox (its port is reserved for it). */
export const IN_SANDBOX_API_PORT = 8080;
/** --image-source host: the host's system directories, read-only, under the sandbox's own writable root. */
const HOST_SYSTEM = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];
const HOST_ETC = ["/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/ssl", "/etc/ca-certificates", "/etc/alternatives"];
export const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Stage 1, inside the sandbox's user and mount namespace (unshare): mount the
 * image's overlay (lower: the image, read-only and shared; upper: the
 * sandbox's own directory) over the image's path — visible in this namespace
 * only, gone with it — then become bwrap.
 */
export const STAGE1 = 'set -e; if [ -n "$1" ]; then mount -t overlay overlay -o "$1" "$2"; fi; shift 2; exec "$@"';
/** Stage 0 (memory limit): the first process joins the sandbox's cgroup before anything else starts. */
export const STAGE0 = 'echo $$ > "$0/cgroup.procs" && exec "$@"';

/**
 * Node reads only its own CA list: pointed at the sandbox's bundle when the host added certificates to it. Not
 * for a sandbox behind the egress proxy (`spec.egress`): its environment names a bundle holding those too
 * (egress-trust.ts), and NODE_EXTRA_CA_CERTS is the variable of sandboxes with a proxy configuration only.
 */
export function caEnv(spec?: Pick<LaunchSpec, "egress">): Record<string, string> {
  if (spec?.egress) return {};
  return hostExtraCertificates() ? { NODE_EXTRA_CA_CERTS: SANDBOX_CA_BUNDLE } : {};
}

/**
 * The extra CAs the agent's own Node trusts: the spec's (the egress proxy's CA, simulator/egress), else the
 * host's (caEnv). Node reads NODE_EXTRA_CA_CERTS once, at start-up, so a warm agent is started with it: setting
 * it at activation reaches the commands it runs, never the agent itself.
 */
export function agentCaEnv(spec: LaunchSpec): Record<string, string> {
  const own = spec.env?.NODE_EXTRA_CA_CERTS;
  return own !== undefined ? { NODE_EXTRA_CA_CERTS: own } : caEnv();
}

/** The agent's command line inside the sandbox, cold or warm (its token comes apart: tokenHandoff, or the activation message). */
export function agentArgv(spec: LaunchSpec, memoryEvents: boolean, kit: SandboxKit): string[] {
  return [
    ...agentArgs({ root: "/", dataDir: AGENT_DATA, sandbox: spec.sandbox, logLevel: spec.logLevel, drivesDir: spec.drivesDir ? DRIVES : undefined }),
    "--socket",
    AGENT_SOCKET,
    // The sandbox's own processes (a template's entrypoint: curl localhost:8080/process) reach it as on the platform.
    ...(spec.inSandboxApi === false ? [] : ["--in-sandbox-port", String(IN_SANDBOX_API_PORT)]),
    "--port-handoff",
    "--process-wrapper",
    JSON.stringify(wrapperAs(kit.processWrapper, spec.user)),
    ...(spec.workingDir ? ["--working-dir", spec.workingDir] : []),
    "--mount-program",
    JSON.stringify(kit.mountProgram),
    "--umount-program",
    JSON.stringify(kit.umountProgram),
    ...(memoryEvents ? ["--memory-events", MEMORY_EVENTS] : []),
  ];
}

/** The one-time token file a cold agent reads and removes (--token-file-remove), as the docker launcher does. */
export function tokenHandoff(spec: LaunchSpec): string[] {
  mkdirSync(spec.dataDir, { recursive: true });
  writeFileSync(join(spec.dataDir, TOKEN_HANDOFF), `${spec.token}\n`, { mode: 0o600 });
  return ["--token-file", `${AGENT_DATA}/${TOKEN_HANDOFF}`, "--token-file-remove"];
}

/** The agent's environment inside the sandbox (the warm agent's activation message). */
export function sandboxEnv(spec: LaunchSpec): NodeJS.ProcessEnv {
  return { ...caEnv(spec), ...agentEnv(spec, "/root"), PATH: spec.env?.PATH ?? SANDBOX_PATH };
}

/** The egress proxy's CA in the sandbox's store (its own layer, before the overlay is mounted) and in its data dir's trust files (egress-trust.ts). */
export function trustEgress(spec: LaunchSpec, egress: SandboxEgressSpec, beforeOverlay: boolean): void {
  if (beforeOverlay) trustInImage(imageLayers(spec), spec.rootDir, egress.caPem);
  const own = join(spec.rootDir, SANDBOX_CA_BUNDLE);
  const system = spec.imageRootDir ? (readBundle(own) ? own : (imageFile(imageLayers(spec), SANDBOX_CA_BUNDLE) ?? "")) : SANDBOX_CA_BUNDLE;
  writeTrustFiles(spec.dataDir, egress.caPem, system);
}

/** `/` of the sandbox: the overlay (mounted over the image's path in stage 1), or its own directory with the host's system read-only. */
export function rootBinds(spec: LaunchSpec): string[] {
  if (spec.imageRootDir) return ["--bind", realpathSync(spec.imageRootDir), "/"];
  for (const dir of ["tmp", "root"]) mkdirSync(join(spec.rootDir, dir), { recursive: true });
  const ro = (path: string) => (existsSync(path) ? ["--ro-bind", path, path] : []);
  // The host's store, read-only, does not trust the egress proxy's CA: the sandbox's bundle (the host's store plus
  // it, egress-trust.ts) is bound over it, for what reads only the system store (curl's check of an https:// proxy).
  const bundle = join(spec.dataDir, "etc", "ca-bundle.crt");
  const store = spec.egress && existsSync(SANDBOX_CA_BUNDLE) && existsSync(bundle) ? ["--ro-bind", bundle, SANDBOX_CA_BUNDLE] : [];
  return ["--bind", spec.rootDir, "/", ...HOST_SYSTEM.flatMap(ro), ...HOST_ETC.flatMap(ro), ...store];
}

/** The sandbox's own layer over the image's layers (a template's over its base's: overlayfs stacks several lower layers, top first). */
export function overlay(spec: LaunchSpec): { options: string; mountAt: string; workDir: string } {
  const lowers = imageLayers(spec).map((dir) => realpathSync(dir));
  const upper = realpathSync(spec.rootDir);
  const workDir = `${upper}.overlay-work`;
  mkdirSync(workDir, { recursive: true });
  for (const path of [...lowers, upper, workDir]) {
    // overlayfs splits its options on "," and ":" (and treats "\" as an escape).
    if (/[,:\\]/.test(path)) throw new LaunchError(`the overlay cannot use ${path}: paths with ",", ":" or "\\" are not supported`);
  }
  return { options: `lowerdir=${lowers.join(":")},upperdir=${upper},workdir=${workDir},userxattr`, mountAt: lowers[0]!, workDir };
}

/** The sandbox's resolver (slirp4netns's DNS forwarder) and hosts file, in its data dir. */
export function writeSandboxEtc(spec: LaunchSpec): { resolv: string; hosts: string } {
  const dir = join(spec.dataDir, "etc");
  mkdirSync(dir, { recursive: true });
  const resolv = join(dir, "resolv.conf");
  const hosts = join(dir, "hosts");
  writeFileSync(resolv, SANDBOX_RESOLV_CONF);
  writeFileSync(hosts, hostsFile(spec.sandbox, spec.egress?.hosts));
  return { resolv, hosts };
}

/**
 * What runs in a sandbox besides what its user runs: its own agent, a warm agent waiting for its sandbox, or, for
 * a sandbox the agent host serves (simulator/agent-host), nothing but the kit's idle process.
 */
export type SandboxTenant = "agent" | "warm" | "hosted";

/** bwrap's arguments: the namespaces, the sandbox's binds, and its tenant's command. */
export function bwrapArgv(
  spec: LaunchSpec,
  etc: { resolv: string; hosts: string },
  kit: SandboxKit,
  cgroup: MemoryCgroup | undefined,
  tenant: SandboxTenant,
): string[] {
  const command =
    tenant === "hosted"
      ? kit.idle
      : [...kit.loader, ...(tenant === "warm" ? [kit.warmMain] : [kit.agentMain, ...agentArgv(spec, cgroup !== undefined, kit), ...tokenHandoff(spec)])];
  return [
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup-try",
    "--hostname",
    spec.sandbox.slice(0, 63),
    "--info-fd",
    "3",
    ...rootBinds(spec),
    "--ro-bind",
    etc.resolv,
    "/etc/resolv.conf",
    "--ro-bind",
    etc.hosts,
    "/etc/hosts",
    ...kit.binds,
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    // The agent's state is the agent's: a hosted sandbox's stays on the host, out of the sandbox's reach, but for
    // the files the sandbox itself reads (its resolver, hosts, the egress proxy's trust: egress-trust.ts).
    ...(tenant === "hosted" ? ["--ro-bind", join(spec.dataDir, "etc"), `${AGENT_DATA}/etc`] : ["--bind", spec.dataDir, AGENT_DATA]),
    ...(spec.drivesDir ? (mkdirSync(spec.drivesDir, { recursive: true }), ["--bind", spec.drivesDir, DRIVES]) : []),
    ...(cgroup && tenant !== "hosted" ? ["--ro-bind", cgroup.eventsFile, MEMORY_EVENTS] : []),
    ...(spec.mounts ?? []).flatMap((m) => {
      if (!existsSync(m.source)) throw new LaunchError(`mount source ${m.source} (for ${m.target}) does not exist`);
      return [m.readOnly ? "--ro-bind" : "--bind", m.source, m.target];
    }),
    "--chdir",
    "/",
    "--",
    ...command,
  ];
}
