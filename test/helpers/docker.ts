import { execFile, execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, openSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { dockerPath, dockerUnavailable } from "../../simulator/launcher/docker.js";

/**
 * Real Docker for the container tests: Debian's docker.io daemon (started here when it is installed but not
 * running and we are root), and a local base image, since no registry is reachable from these machines: a
 * Debian bookworm root filesystem made by mmdebstrap (python3, make, g++ for the agent's native module),
 * `docker import`ed, plus this machine's Node.js and npm — a stand-in for the official node:20-bookworm-slim.
 * The root filesystem is cached under ~/.cache/sandbox-kit (built once per machine, ~3 min); the images stay
 * in the daemon. Everything answers a reason to skip where it cannot be had.
 */
const run = promisify(execFile);
export const LOCAL_BASE = "sandbox-kit-test/node20:bookworm";
const DEBIAN_BASE = "sandbox-kit-test/debian-build:bookworm";
const cacheDir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "sandbox-kit", "docker");

async function ok(cmd: string, args: string[], timeout = 30_000): Promise<boolean> {
  try {
    await run(cmd, args, { timeout });
    return true;
  } catch {
    return false;
  }
}

/** Undefined when a daemon answers (started here if need be), else why the container tests skip. */
export async function ensureDockerDaemon(): Promise<string | undefined> {
  if (!dockerPath()) return "no docker CLI (apt-get install docker.io)";
  if ((await dockerUnavailable()) === undefined) return undefined;
  if (process.getuid?.() !== 0 || !(await ok("sh", ["-c", "command -v dockerd"]))) return await dockerUnavailable();
  // A daemon for this machine, left running like a system service (there is no systemd here).
  mkdirSync(cacheDir, { recursive: true });
  const log = openSync(join(cacheDir, "dockerd.log"), "a");
  spawn("dockerd", [], { detached: true, stdio: ["ignore", log, log] }).unref();
  for (let i = 0; i < 60; i++) {
    await sleep(500);
    if ((await dockerUnavailable()) === undefined) return undefined;
  }
  return `dockerd did not come up: ${readFileSync(join(cacheDir, "dockerd.log"), "utf8").split("\n").slice(-3).join(" ")}`;
}

/** One builder at a time across test files and processes (mkdir is atomic); a dead holder's lock is taken over. */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const lock = join(cacheDir, `${name}.lock`);
  mkdirSync(cacheDir, { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch {
      const holder = Number(readFileSync(join(lock, "pid"), "utf8").trim() || "0");
      if (holder && !existsSync(`/proc/${holder}`)) rmSync(lock, { recursive: true, force: true });
      else await sleep(1_000);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

const imageExists = (image: string) => ok("docker", ["image", "inspect", image]);

/** The local Node 20 base image (see above); throws with the reason when it cannot be built. */
export async function ensureLocalBaseImage(): Promise<string> {
  if (await imageExists(LOCAL_BASE)) return LOCAL_BASE;
  return withLock("base-image", async () => {
    if (await imageExists(LOCAL_BASE)) return LOCAL_BASE;
    if (!(await imageExists(DEBIAN_BASE))) {
      // CI hands over the root filesystem it built this run (SANDBOX_KIT_TEST_ROOTFS), so nothing an earlier
      // run left in the cache is relied on; elsewhere it is built once per machine into the cache.
      const tar = process.env.SANDBOX_KIT_TEST_ROOTFS || join(cacheDir, "bookworm-build.tar");
      // Only a regular file is a usable archive (an earlier, broken build left a directory of that name).
      if (existsSync(tar) && !statSync(tar).isFile()) rmSync(tar, { recursive: true, force: true });
      if (!existsSync(tar)) {
        if (!(await ok("sh", ["-c", "command -v mmdebstrap"]))) throw new Error("mmdebstrap is not installed (apt-get install mmdebstrap)");
        // --format=tar: mmdebstrap picks the format from the name otherwise (".partial" wrote a directory).
        const partial = `${tar.replace(/\.tar$/, "")}.partial.tar`;
        rmSync(partial, { recursive: true, force: true });
        await run(
          "mmdebstrap",
          ["--format=tar", "--variant=minbase", "--include=ca-certificates,python3,make,g++", "bookworm", partial, "http://deb.debian.org/debian"],
          { timeout: 900_000, maxBuffer: 64 << 20 },
        );
        renameSync(partial, tar);
      }
      await run("sh", ["-c", `docker import - ${DEBIAN_BASE} < "$1"`, "sh", tar], { timeout: 300_000 });
    }
    const context = join(cacheDir, "node-context");
    rmSync(context, { recursive: true, force: true });
    mkdirSync(context, { recursive: true });
    cpSync(realpathSync(process.execPath), join(context, "node"));
    const npmDir = join(dirname(realpathSync(process.execPath)), "..", "lib", "node_modules", "npm");
    cpSync(npmDir, join(context, "npm"), { recursive: true });
    // Node's headers, so node-gyp builds native modules against them instead of downloading them (no
    // nodejs.org here), as this machine's npm is set up to (nodedir).
    cpSync(join(dirname(realpathSync(process.execPath)), "..", "include", "node"), join(context, "include-node"), { recursive: true });
    // The machine's trust store as well: where outbound TLS goes through an inspecting proxy with its own
    // CA (as on these machines), npm inside a build needs it just as the host's npm does.
    cpSync(process.env.NODE_EXTRA_CA_CERTS ?? "/etc/ssl/certs/ca-certificates.crt", join(context, "ca-certificates.crt"));
    writeFileSync(
      join(context, "Dockerfile"),
      [
        `FROM ${DEBIAN_BASE}`,
        "COPY node /usr/local/bin/node",
        "COPY npm /usr/local/lib/node_modules/npm",
        "COPY include-node /usr/local/include/node",
        "ENV npm_config_nodedir=/usr/local",
        "COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
        "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt",
        "RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version",
        "",
      ].join("\n"),
    );
    await run("docker", ["build", "-q", "-t", LOCAL_BASE, context], { timeout: 300_000 });
    rmSync(context, { recursive: true, force: true });
    return LOCAL_BASE;
  });
}

/** Builds this repository's Dockerfile on the local base; resolves with the tag and how long it took. */
export async function buildAgentImage(repo: string, tag: string): Promise<{ tag: string; seconds: number }> {
  const base = await ensureLocalBaseImage();
  const started = Date.now();
  await withLock("agent-image", () =>
    run("docker", ["build", "-q", "--build-arg", `BASE=${base}`, "-t", tag, repo], { timeout: 900_000, maxBuffer: 16 << 20 }),
  );
  return { tag, seconds: (Date.now() - started) / 1000 };
}

/**
 * A few-MB image of the host's /bin/sh, cat, hostname and the libraries they and node need (the agent runs the
 * host's node from its bind mount), `docker import`ed: quick to push to a registry, unlike the tests' Debian base.
 */
export function tinyImage(): string {
  const tag = "sandbox-kit-test/swarm-tiny:2";
  try {
    execFileSync("docker", ["image", "inspect", tag], { stdio: "ignore" });
    return tag;
  } catch {
    // Built below.
  }
  // By their /bin names (on usrmerged Debian /bin is a link; --dereference stores a real bin/ directory).
  const programs = ["/bin/sh", "/bin/cat", "/bin/hostname", "/bin/echo"];
  const libs = [...programs, process.execPath].flatMap((bin) =>
    [...execFileSync("ldd", [bin], { encoding: "utf8" }).matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]!),
  );
  const paths = [...new Set([...programs, ...libs])].map((p) => p.slice(1));
  execFileSync("sh", ["-c", `tar --dereference -cf - -C / "$@" | docker import - ${tag}`, "sh", ...paths], { stdio: ["ignore", "ignore", "pipe"] });
  return tag;
}

/** The images of sandboxes' files (docker-files.ts) the daemon holds now, by id and tag. */
export function filesImages(): Set<string> {
  try {
    const out = execFileSync("docker", ["images", "--format", "{{.Repository}}:{{.Tag}}"], { encoding: "utf8" });
    return new Set(out.split("\n").filter((ref) => /(^|\/)sandbox-kit-files:/.test(ref)));
  } catch {
    return new Set();
  }
}

/**
 * Removes the files images made since `before` that a test left (launchers driven directly, whose sandbox
 * directories the test removes without Launcher.removeTree, or a simulator killed with -9).
 */
export function removeFilesImagesSince(before: Set<string>): void {
  const left = [...filesImages()].filter((ref) => !before.has(ref));
  if (left.length > 0) execFileSync("docker", ["rmi", "--force", ...left], { stdio: "ignore" });
}
