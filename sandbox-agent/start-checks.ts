import { mkdirSync, statSync } from "node:fs";
import { StartupError } from "../src/startup.js";

/**
 * The directories the agent is given: a path naming a file is the user's mistake (one line, exit 2); a
 * missing directory is created, and the caller logs that it was (a typo would otherwise go unnoticed).
 */
export function ensureDirectory(path: string, flag: string): "created" | "existed" {
  try {
    if (statSync(path).isDirectory()) return "existed";
    throw new StartupError(`${flag} ${path} is a file, not a directory: pass a directory (a missing one is created)`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      if (err instanceof StartupError) throw err;
      throw new StartupError(`${flag} ${path}: ${(err as Error).message}`);
    }
  }
  try {
    mkdirSync(path, { recursive: true });
  } catch (err) {
    throw new StartupError(`${flag} ${path} cannot be created: ${(err as Error).message}`);
  }
  return "created";
}
