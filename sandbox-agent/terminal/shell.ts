import { accessSync, constants } from "node:fs";

/** The reference daemon's fallbacks when $SHELL is unset or missing (handler/terminal/terminal.go findShell). */
export const FALLBACK_SHELLS = ["/bin/zsh", "/bin/bash", "/bin/sh", "/bin/ash"] as const;

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The shell a terminal runs: the one asked for (the reference's `shell`
 * query), else the sandbox's $SHELL, else the first of zsh, bash, sh, ash
 * that exists, else /bin/sh — the reference's order. A path that is not an
 * executable file is skipped, so an image whose SHELL names a missing binary
 * still gets a shell.
 */
export function findShell(env: NodeJS.ProcessEnv, requested?: string, exists: (path: string) => boolean = executable): string {
  for (const candidate of [requested, env.SHELL?.trim(), ...FALLBACK_SHELLS]) {
    if (candidate && candidate.startsWith("/") && exists(candidate)) return candidate;
  }
  return "/bin/sh";
}

/** The sandbox's environment with the terminal type xterm.js and the CLI both speak (reference: TERM=xterm-256color). */
export function terminalEnv(base: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) if (value !== undefined) env[key] = value;
  env.TERM = "xterm-256color";
  return env;
}
