import { execFile, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { which } from "./isolation.js";
import { LaunchError, type LaunchSpec } from "./types.js";

/** Small pieces of an isolated sandbox's set-up (bwrap.ts). */

/** A sandbox's /etc/hosts; `simulator`: names of the simulator (its --public-url's host), which lead to its gateway on 127.0.0.1. */
export function hostsFile(sandbox: string, simulator: string[] = []): string {
  return `127.0.0.1\tlocalhost${simulator.map((n) => ` ${n}`).join("")}\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t${sandbox.slice(0, 63)}\n`;
}

/**
 * The sandbox's hosts file (bound read-only at /etc/hosts) rewritten in place while `child` (its top process)
 * runs, whenever the simulator's names change (SandboxEgressSpec.watchHosts: a host-form preview created).
 */
export function keepHostsCurrent(path: string, spec: Pick<LaunchSpec, "sandbox" | "egress">, child: ChildProcess): void {
  const watch = spec.egress?.watchHosts;
  if (!watch || child.exitCode !== null || child.signalCode !== null) return;
  const stop = watch((names) => writeFileSync(path, hostsFile(spec.sandbox, names)));
  child.once("exit", stop);
}

/**
 * A warm sandbox's UTS namespace gets its sandbox's name: the simulator's user
 * owns the sandbox's user namespace, so it may enter it and set the hostname.
 */
let tools: { nsenter?: string; hostname?: string } | undefined;

export async function setHostname(sandboxPid: number, name: string): Promise<void> {
  tools ??= { nsenter: which("nsenter"), hostname: which("hostname") };
  const { nsenter, hostname } = tools;
  if (!nsenter || !hostname) return; // the warm sandbox keeps its placeholder name
  // Not synchronously: the simulator's other requests go on while nsenter runs (under load, tens of ms).
  await new Promise<void>((resolve) => {
    // Not fatal when it fails: the sandbox runs, under its placeholder hostname.
    execFile(nsenter, ["--target", String(sandboxPid), "--user", "--preserve-credentials", "--uts", hostname, name], { timeout: 5_000 }, () => resolve());
  });
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

/** Where Debian keeps the CA certificates a host's administrator added (update-ca-certificates reads them). */
const HOST_EXTRA_CA_DIR = "/usr/local/share/ca-certificates";
export const SANDBOX_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
let extraCertificates: string | undefined;

/**
 * The host's locally added CA certificates (a TLS-inspecting proxy's, a
 * company's), PEM, "" when there are none. A sandbox whose traffic leaves
 * through such a host needs them to reach anything over TLS (`npm install`).
 */
export function hostExtraCertificates(dir = HOST_EXTRA_CA_DIR): string {
  if (dir === HOST_EXTRA_CA_DIR && extraCertificates !== undefined) return extraCertificates;
  let pem = "";
  try {
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith(".crt")) pem += `${readFileSync(join(entry.parentPath, entry.name), "utf8").trim()}\n`;
    }
  } catch {
    // No such directory: nothing added.
  }
  if (dir === HOST_EXTRA_CA_DIR) extraCertificates = pem;
  return pem;
}

/** The image's layers of a launch, top first (LaunchSpec.imageRootDir over imageLowerDirs). */
export function imageLayers(spec: { imageRootDir?: string; imageLowerDirs?: string[] }): string[] {
  return spec.imageRootDir ? [spec.imageRootDir, ...(spec.imageLowerDirs ?? [])] : [];
}

/**
 * Where a path of the image is on the host: in the topmost of its layers (top first) that has it, as
 * overlayfs shows it; undefined when none has it or that layer deleted it (a whiteout, character device 0/0).
 */
export function imageFile(layers: string[], path: string): string | undefined {
  for (const layer of layers) {
    const host = join(layer, path);
    const st = lstatSync(host, { throwIfNoEntry: false });
    if (!st) continue;
    return st.isCharacterDevice() && st.rdev === 0 ? undefined : host;
  }
  return undefined;
}

/**
 * Before the overlay is mounted: the sandbox's own layer gets the image's CA
 * bundle plus the host's added certificates, unless the sandbox already has
 * its own bundle there (kept across restarts). Nothing when the host added none.
 */
export function addHostCertificates(imageLayers: string[], upper: string, extras = hostExtraCertificates()): boolean {
  if (!extras) return false;
  const target = join(upper, SANDBOX_CA_BUNDLE);
  if (existsSync(target)) return true;
  const imageBundle = imageFile(imageLayers, SANDBOX_CA_BUNDLE);
  // A bundle that is a link is the image's business (it would resolve against the host here): start from nothing then.
  const base = imageBundle && lstatSync(imageBundle).isFile() ? readFileSync(imageBundle, "utf8") : "";
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, `${base.trimEnd()}\n${extras}`, { mode: 0o644 });
  return true;
}
