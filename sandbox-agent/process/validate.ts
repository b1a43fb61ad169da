import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import type { StartProcessRequest } from "./types.js";

/** Characters that would make a name unusable in a URL path segment or a log line. */
const CONTROL = /[\u0000-\u001f\u007f]/;

export const StartProcessSchema = z.object({
  command: z
    .string()
    .min(1, "is required and must not be empty")
    .refine((c) => !c.includes("\0"), "must not contain NUL bytes"),
  name: z
    .string()
    .min(1, "must not be empty")
    .max(256, "must be at most 256 characters")
    .refine((n) => !CONTROL.test(n), "must not contain control characters")
    .refine((n) => !n.includes("/"), "must not contain '/'")
    // An all-digit identifier is looked up as a pid only (reference rule), so such a name could never be found.
    .refine((n) => !/^\d+$/.test(n), "must not be all digits (an all-digit identifier is a pid)")
    .optional(),
  workingDir: z.string().optional(),
  env: z
    .record(
      z
        .string()
        .min(1)
        .refine((k) => !k.includes("=") && !k.includes("\0"), "environment variable names must not contain '=' or NUL"),
      z.string().refine((v) => !v.includes("\0"), "must not contain NUL bytes"),
    )
    .optional(),
  timeout: z.number().int("must be a whole number of seconds").min(0, "must be 0 (none) or a positive number of seconds").optional(),
  killAfter: z.number().int("must be a whole number of seconds").min(0, "must be 0 (never) or a positive number of seconds").optional(),
  keepAlive: z.boolean().optional(),
  restartOnFailure: z.boolean().optional(),
  maxRestarts: z.number().int("must be a whole number").optional(),
  stdin: z.boolean().optional(),
});

/** Checks a start request (from HTTP or from the scheduler) and drops empty optional fields. */
export function validateStartRequest(req: StartProcessRequest): StartProcessRequest {
  const parsed = parse(StartProcessSchema, req, "");
  return { ...parsed, workingDir: parsed.workingDir || undefined };
}

/**
 * The host directory a command runs in: `sandboxDir` resolved under the root
 * (403 if a symlink leads outside), which must exist and be a directory.
 */
export async function resolveWorkingDir(paths: SandboxPaths, command: string, raw: string, sandboxDir: string): Promise<string> {
  return paths.use(sandboxDir, { follow: true }, async (p) => {
    // Same wording as the reference daemon, whose integration tests look for the command and the folder.
    if (!p.stat) throw errors.unprocessable(`failed to start process: could not execute command '${command}' because folder '${raw}' does not exist`);
    if (!p.stat.isDirectory()) throw errors.unprocessable(`failed to start process: could not execute command '${command}' because '${raw}' is not a folder`);
    // A sandbox served from outside has no host path: its commands change to the sandbox path inside it (ns-spawn.ts).
    return paths.rootHeld ? "/" : p.hostPath();
  });
}
