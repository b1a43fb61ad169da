import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { tempDir } from "./agent.js";

/**
 * A bare sandbox for tests of commands entered from outside: bubblewrap with
 * its own user, mount, PID, network, IPC, UTS and cgroup namespaces, whose `/`
 * is a fresh host directory (`root`) with the host's /usr (read-only), fresh
 * /proc, /dev and /tmp, and nothing else of the host's; its PID 1 is bwrap's
 * init, which is what an agent host enters. No agent runs in it.
 */
export interface NsSandbox {
  /** Host directory that is the sandbox's `/`. */
  root: string;
  /** Host pid of the sandbox's PID 1. */
  pid: number;
  hostname: string;
  bwrap: ChildProcess;
  stop(): Promise<void>;
}

const BWRAP_ARGS = ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"];

/** Why these tests cannot run here (no bwrap, no user namespaces), or "" when they can. */
export function nsSandboxUnavailable(): string {
  if (process.platform !== "linux") return `namespaces need Linux, this is ${process.platform}`;
  const tried = spawnSync("bwrap", [...BWRAP_ARGS, "--ro-bind", "/", "/", "true"], { encoding: "utf8" });
  if (tried.error) return `bwrap could not run: ${tried.error.message}`;
  if (tried.status !== 0) return `bwrap cannot make namespaces here: ${tried.stderr.trim()}`;
  return "";
}

export async function startNsSandbox(hostname = "ns-sandbox"): Promise<NsSandbox> {
  const root = tempDir("ns-sandbox-");
  for (const dir of ["usr", "proc", "dev", "tmp", "work"]) mkdirSync(join(root, dir), { recursive: true });
  const args = [
    ...BWRAP_ARGS,
    "--uid",
    "0",
    "--gid",
    "0",
    "--hostname",
    hostname,
    "--bind",
    root,
    "/",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--info-fd",
    "3",
    "--",
    "sh",
    "-c",
    "echo ready; exec sleep infinity",
  ];
  const bwrap = spawn("bwrap", args, { stdio: ["ignore", "pipe", "inherit", "pipe"] });
  // bwrap reports its init's pid before that init has built the root (pivot_root): a host that opened
  // /proc/<pid>/root then would hold the old root. The command's first line says the sandbox is set up.
  const ready = new Promise<void>((resolve, reject) => {
    bwrap.stdout!.once("data", () => resolve());
    bwrap.once("exit", (code) => reject(new Error(`bwrap exited (${code}) before its command ran`)));
  });
  const info = await new Promise<string>((resolve, reject) => {
    let text = "";
    const stream = bwrap.stdio[3] as Readable;
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      text += chunk;
      if (text.includes("}")) resolve(text);
    });
    bwrap.once("exit", (code) => reject(new Error(`bwrap exited (${code}) before it was set up`)));
  });
  const pid = Number(/"child-pid":\s*(\d+)/.exec(info)?.[1]);
  await ready;
  const exited = new Promise<void>((resolve) => bwrap.once("exit", () => resolve()));
  return {
    root,
    pid,
    hostname,
    bwrap,
    // The namespace's init by pid: bwrap arms its --die-with-parent only once its own setup ends, so an init whose
    // outer bwrap was killed just after start can outlive it. Its end ends every process of the PID namespace.
    stop: async () => {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
      bwrap.kill("SIGKILL");
      await exited;
      while (existsSync(`/proc/${pid}`)) await new Promise((resolve) => setTimeout(resolve, 5));
    },
  };
}
