import { execFile } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

/**
 * The image of a cluster node (`npm run cluster`): Debian bookworm with its docker.io (dockerd, containerd, runc),
 * iptables, iproute2 and docker-registry, made offline from Debian packages by mmdebstrap and `docker import`ed:
 * nothing is pulled from a registry. The root filesystem is cached like the hub images' (built once per machine,
 * a few minutes; ~/.cache/sandbox-kit/cluster/node-bookworm.tar); the image stays in the host's daemon.
 */
const run = promisify(execFile);
export const NODE_IMAGE = "sandbox-kit/cluster-node:bookworm-1";
export const NODE_PACKAGES = ["docker.io", "iptables", "iproute2", "ca-certificates", "docker-registry", "procps"];

export function clusterCacheDir(): string {
  return join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "sandbox-kit", "cluster");
}

async function hasImage(docker: string, image: string): Promise<boolean> {
  try {
    await run(docker, ["image", "inspect", "--format", "{{.Id}}", image], { timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

/** The node image in the host's daemon (built from the cached root filesystem, made first when missing). */
export async function ensureNodeImage(docker = "docker", log: (line: string) => void = () => {}, mirror = "http://deb.debian.org/debian"): Promise<string> {
  if (await hasImage(docker, NODE_IMAGE)) return NODE_IMAGE;
  const dir = clusterCacheDir();
  mkdirSync(dir, { recursive: true });
  const tar = join(dir, "node-bookworm.tar");
  if (existsSync(tar) && !statSync(tar).isFile()) rmSync(tar, { recursive: true, force: true });
  if (!existsSync(tar)) {
    log(`building the node's root filesystem with mmdebstrap (${NODE_PACKAGES.join(", ")}): a few minutes, once per machine`);
    const partial = join(dir, "node-bookworm.partial.tar");
    rmSync(partial, { recursive: true, force: true });
    try {
      await run("mmdebstrap", ["--format=tar", "--variant=minbase", `--include=${NODE_PACKAGES.join(",")}`, "bookworm", partial, mirror], {
        timeout: 1_800_000,
        maxBuffer: 64 << 20,
      });
    } catch (err) {
      const stderr = String((err as { stderr?: string }).stderr ?? "").trim();
      throw new Error(
        (err as NodeJS.ErrnoException).code === "ENOENT"
          ? "mmdebstrap is not installed (apt-get install mmdebstrap)"
          : `mmdebstrap failed: ${stderr.split("\n").slice(-3).join(" ") || (err as Error).message}`,
      );
    }
    renameSync(partial, tar);
  }
  log(`importing the node image ${NODE_IMAGE}`);
  await run(
    "sh",
    ["-c", `"$1" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$2" < "$3"`, "sh", docker, NODE_IMAGE, tar],
    {
      timeout: 600_000,
    },
  );
  return NODE_IMAGE;
}
