import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { agentArgs, agentEnv, agentMainPath, packageRootOf } from "./agent-main.js";
import { startChild } from "./child.js";
import { cmdlineOf, descendantsOf } from "./proc.js";
import { LaunchError, type AgentHandle, type LaunchSpec, type Launcher } from "./types.js";

/** Inside the namespace: where the agent's state and the workspace's drives appear. */
const AGENT_DATA = "/run/sandbox-agent";
const DRIVES = "/run/sandbox-drives";
/** Host configuration a shell and DNS need, read-only; each only when the host has it. */
const HOST_ETC = ["/etc/resolv.conf", "/etc/hosts", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/ssl", "/etc/ca-certificates"];

export function bwrapPath(): string | undefined {
  try {
    return execFileSync("sh", ["-c", "command -v bwrap"], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The agent in its own mount, PID, IPC and UTS namespaces (Debian's
 * bubblewrap): the sandbox's root directory is `/`, the host's /usr, /bin,
 * /lib (and node, and this package's dist/ and node_modules/) are mounted
 * read-only, /proc and /dev are fresh. The network namespace is shared so
 * the agent listens on the host's loopback, where the proxy reaches it.
 * Processes in one sandbox see neither another sandbox's files nor its processes.
 */
export class BwrapLauncher implements Launcher {
  readonly name = "bwrap";
  private readonly bwrap: string;

  constructor(private readonly options: { agentMain?: string; readyTimeoutMs?: number; bwrap?: string } = {}) {
    const found = options.bwrap ?? bwrapPath();
    if (!found) throw new LaunchError("--launcher bwrap needs bubblewrap: apt-get install -y bubblewrap");
    this.bwrap = found;
  }

  start(spec: LaunchSpec): Promise<AgentHandle> {
    for (const dir of [spec.rootDir, spec.dataDir, join(spec.rootDir, "tmp"), join(spec.rootDir, "root")]) mkdirSync(dir, { recursive: true });
    const agentMain = realpathSync(this.options.agentMain ?? agentMainPath());
    const pkg = packageRootOf(agentMain);
    const node = realpathSync(process.execPath);
    const ro = (path: string) => (existsSync(path) ? ["--ro-bind", path, path] : []);
    const args = [
      "--die-with-parent", "--new-session",
      "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
      "--hostname", spec.sandbox.slice(0, 63),
      "--bind", spec.rootDir, "/",
      ...["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"].flatMap(ro),
      ...HOST_ETC.flatMap(ro),
      // node itself when it lives outside /usr (nvm, a tarball install).
      ...(node.startsWith("/usr/") ? [] : ro(dirname(dirname(node)))),
      ...ro(join(pkg, "package.json")), ...ro(join(pkg, "dist")), ...ro(join(pkg, "node_modules")),
      "--proc", "/proc", "--dev", "/dev",
      "--bind", spec.dataDir, AGENT_DATA,
      ...(spec.drivesDir ? (mkdirSync(spec.drivesDir, { recursive: true }), ["--bind", spec.drivesDir, DRIVES]) : []),
      "--chdir", "/",
      "--", node, agentMain,
      ...agentArgs({ root: "/", dataDir: AGENT_DATA, sandbox: spec.sandbox, logLevel: spec.logLevel, drivesDir: spec.drivesDir ? DRIVES : undefined }),
    ];
    return startChild({
      command: this.bwrap,
      args, // names the host data dir (--bind), so a later run can recognise an orphan
      env: agentEnv(spec, "/root"),
      dataDir: spec.dataDir,
      readyTimeoutMs: this.options.readyTimeoutMs,
      // SIGTERM must reach the agent so it closes its database; bwrap does not forward signals.
      termTargets: (pid) => descendantsOf(pid).filter((p) => cmdlineOf(p).includes(agentMain)),
    });
  }
}
