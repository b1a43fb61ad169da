import { execFileSync } from "node:child_process";
import { chmodSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { which } from "./isolation.js";
import { LaunchError } from "./types.js";

/** Small pieces of an isolated sandbox's set-up (bwrap.ts). */

export function hostsFile(sandbox: string): string {
  return `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t${sandbox.slice(0, 63)}\n`;
}

/**
 * A warm sandbox's UTS namespace gets its sandbox's name: the simulator's user
 * owns the sandbox's user namespace, so it may enter it and set the hostname.
 */
let tools: { nsenter?: string; hostname?: string } | undefined;

export function setHostname(sandboxPid: number, name: string): void {
  tools ??= { nsenter: which("nsenter"), hostname: which("hostname") };
  const { nsenter, hostname } = tools;
  if (!nsenter || !hostname) return; // the warm sandbox keeps its placeholder name
  try {
    execFileSync(nsenter, ["--target", String(sandboxPid), "--user", "--preserve-credentials", "--uts", hostname, name], { stdio: "ignore", timeout: 5_000 });
  } catch {
    // Not fatal: the sandbox runs, under its placeholder hostname.
  }
}

/** bwrap's --info-fd JSON: the host pid of the sandbox's first process (its PID namespace's init). */
export function readInfo(stream: Readable): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = "";
    stream.setEncoding("utf8");
    stream.on("data", (d: string) => {
      text += d;
      const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (match) resolve(Number(match[1]));
    });
    stream.once("close", () => reject(new LaunchError(`bwrap ended before reporting the sandbox's pid: ${text.trim()}`)));
    stream.on("error", () => {});
  });
}

/** overlayfs leaves work/work with mode 000: make it removable by the simulator's user (retention, delete). */
export function unlockWorkDir(workDir: string): void {
  try {
    chmodSync(join(workDir, "work"), 0o700);
  } catch {
    // Never created, or already gone.
  }
}
