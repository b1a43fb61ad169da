import { execFileSync, spawn } from "node:child_process";

/** The docker CLI, run with argv only (never a shell): what every Docker-driving part of the launchers shares. */

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function dockerPath(): string | undefined {
  try {
    return execFileSync("sh", ["-c", "command -v docker"], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
}

export function runDocker(docker: string, args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 60_000): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(docker, args, { env, stdio: ["ignore", "pipe", "pipe"], timeout: timeoutMs });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-8192)));
    child.once("error", (err) => resolve({ code: null, stdout, stderr: `${stderr}${err.message}` }));
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}
