import type { ImageConfig } from "./docker-source.js";
import type { ImageService } from "./recipes.js";

/**
 * An image's ENTRYPOINT and CMD, run when its sandbox starts, as the
 * process named `entrypoint` the simulator starts through the sandbox's agent
 * once it is healthy (like the hub images' services). The agent does not
 * depend on it: it is already running, and answers on localhost:8080 inside
 * the sandbox, so a template's entrypoint (`/usr/local/bin/sandbox-api &`,
 * wait for 8080, `curl -X POST localhost:8080/process ...`, `wait`) drives
 * its own sandbox, and what it starts is listed by the SDK. Its output is the
 * process's logs (`sandbox.process.logs("entrypoint")`); when it ends, its exit
 * code is there too and the sandbox keeps running (on the platform the
 * entrypoint is the VM's main process: a template whose entrypoint ends fails).
 */

export const ENTRYPOINT_PROCESS = "entrypoint";

/** A word quoted for sh: single quotes, each ' as '\''. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Docker's rule: ENTRYPOINT followed by CMD as its arguments, or CMD alone; nothing when both are empty. */
export function entrypointArgv(config: Pick<ImageConfig, "entrypoint" | "cmd">): string[] {
  return [...(config.entrypoint ?? []), ...(config.cmd ?? [])];
}

/** The entrypoint as a process the agent starts (`exec`: the process is the entrypoint itself, not a shell around it). */
export function entrypointService(config: ImageConfig): ImageService | undefined {
  const argv = entrypointArgv(config);
  if (argv.length === 0) return undefined;
  return { name: ENTRYPOINT_PROCESS, command: `exec ${argv.map(shellQuote).join(" ")}`, workingDir: config.workingDir || "/" };
}
