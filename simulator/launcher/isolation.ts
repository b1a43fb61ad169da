import { execFileSync } from "node:child_process";

/**
 * What the isolating launcher needs from the host, found once: bubblewrap,
 * util-linux's unshare (the sandbox's user and mount namespaces, where the
 * overlay is mounted), setpriv (commands start with no capabilities) and
 * mount; slirp4netns for outbound network. `unavailable` is one line saying
 * what is missing and what to do.
 */
export interface IsolationTools {
  bwrap: string;
  unshare: string;
  setpriv: string;
  /** mount(8) and umount(8): the agent's drives use these (bound into the sandbox kit), never the image's. */
  mount: string;
  umount: string;
  slirp4netns?: string;
}

export interface IsolationProbe {
  tools?: IsolationTools;
  unavailable?: string;
}

const FALLBACK = "or pass --launcher process (no isolation: commands run on the host)";

export function which(name: string): string | undefined {
  try {
    return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim() || undefined;
  } catch {
    return undefined;
  }
}

let cached: IsolationProbe | undefined;

export function probeIsolation(): IsolationProbe {
  cached ??= probe();
  return cached;
}

function probe(): IsolationProbe {
  if (process.platform !== "linux")
    return {
      unavailable: `sandbox isolation needs Linux namespaces (this is ${process.platform}): pass --launcher process (no isolation) or --launcher docker`,
    };
  const bwrap = which("bwrap");
  const unshare = which("unshare");
  const setpriv = which("setpriv");
  const mount = which("mount");
  const umount = which("umount");
  const missing = [!bwrap && "bubblewrap", !(unshare && setpriv && mount && umount) && "util-linux (unshare, setpriv, mount, umount)"].filter(Boolean);
  if (missing.length > 0)
    return {
      unavailable: `sandbox isolation needs ${missing.join(" and ")}: apt-get install -y ${missing.map((m) => (m === "bubblewrap" ? "bubblewrap" : "util-linux mount")).join(" ")}, ${FALLBACK}`,
    };
  try {
    // The whole chain once: a user and mount namespace, then bwrap's PID and network namespaces inside it.
    execFileSync(
      unshare!,
      [
        "--user",
        "--map-root-user",
        "--mount",
        bwrap!,
        "--ro-bind",
        "/",
        "/",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
      ],
      { stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 },
    );
  } catch (err) {
    const why = ((err as { stderr?: Buffer }).stderr?.toString() ?? (err as Error).message).trim().split("\n").pop();
    return {
      unavailable: `user namespaces are not usable here (${why}): allow them (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, or an AppArmor profile for bwrap), ${FALLBACK}`,
    };
  }
  return { tools: { bwrap: bwrap!, unshare: unshare!, setpriv: setpriv!, mount: mount!, umount: umount!, slirp4netns: which("slirp4netns") } };
}
