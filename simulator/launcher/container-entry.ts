#!/usr/bin/env node
import { readFileSync, rmSync } from "node:fs";
import { pathToFileURL } from "node:url";

/**
 * The first program of a sandbox's container (docker and swarm launchers): `node container-entry.js <env file>
 * <agent main> <agent args...>`. The sandbox's variables (spec.runtime.envs, the egress settings) come in a file
 * of the data dir the launcher wrote (0600) and that this deletes once read, never as `--env`: Docker would keep
 * them in the container's config, where `docker inspect` shows them, a swarm keeps them in its raft log, and
 * `docker commit` (how the sandbox's files are kept, docker-files.ts) would copy them into every image of the
 * sandbox's files, so a variable removed from the spec would come back from its own layer. The container's
 * environment is the image's; the file's variables go over it; then the agent starts in this same process.
 */
const [envFile, agentMain, ...agentArgs] = process.argv.slice(2);
if (!envFile || !agentMain) {
  process.stderr.write("container-entry: usage: container-entry.js <env file> <agent main> [agent args...]\n");
  process.exit(2);
}
let variables: Record<string, string> = {};
try {
  variables = JSON.parse(readFileSync(envFile, "utf8")) as Record<string, string>;
  rmSync(envFile, { force: true });
} catch (err) {
  // A restart by the container runtime itself (not the launcher's) finds no file: the image's environment only.
  if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
    process.stderr.write(`container-entry: cannot read the sandbox's environment: ${(err as Error).message}\n`);
    process.exit(2);
  }
}
for (const [name, value] of Object.entries(variables)) if (typeof value === "string") process.env[name] = value;
process.argv = [process.argv[0]!, agentMain, ...agentArgs];
await import(pathToFileURL(agentMain).href);
