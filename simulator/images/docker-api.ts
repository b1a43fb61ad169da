import { readFileSync } from "node:fs";
import { request } from "node:http";
import { homedir } from "node:os";
import { join } from "node:path";

/**
 * Read-only questions to the Docker daemon through its Engine API socket:
 * `GET /images/{name}/json` answers exactly the JSON `docker image inspect`
 * prints (the CLI prints the API's answer), without starting a docker CLI
 * process (20-40 ms each on a busy machine: most of what a template build
 * added to the `docker build` it runs). Used only where the CLI would talk to
 * the local socket itself (no DOCKER_HOST other than unix://, no context
 * chosen); anywhere else, or when the socket does not answer, callers ask the
 * CLI as before. Builds, imports and removals always go through the CLI.
 */

const DEFAULT_SOCKET = "/var/run/docker.sock";

/** The socket the docker CLI would use here, or undefined when it would use something else (a context, TCP, SSH). */
export function localDockerSocket(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.DOCKER_CONTEXT) return undefined;
  const host = env.DOCKER_HOST;
  if (host) return host.startsWith("unix://") ? host.slice("unix://".length) : undefined;
  try {
    const config = JSON.parse(readFileSync(join(env.DOCKER_CONFIG || join(homedir(), ".docker"), "config.json"), "utf8")) as { currentContext?: string };
    if (config.currentContext && config.currentContext !== "default") return undefined;
  } catch {
    // No CLI configuration: the CLI's default.
  }
  return DEFAULT_SOCKET;
}

/** One image's inspect JSON; null when the daemon has no such image; undefined when the socket cannot answer (ask the CLI). */
function inspectOne(socket: string, name: string, timeoutMs: number): Promise<unknown | null | undefined> {
  return new Promise((resolve) => {
    const req = request(
      { socketPath: socket, path: `/images/${encodeURI(name)}/json`, method: "GET", headers: { host: "docker" }, timeout: timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", () => resolve(undefined));
        res.on("end", () => {
          if (res.statusCode === 404) return resolve(null);
          if (res.statusCode !== 200) return resolve(undefined);
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown);
          } catch {
            resolve(undefined);
          }
        });
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
    req.end();
  });
}

/**
 * `docker image inspect` of each name through the socket, in order (null: no such image); undefined when the
 * CLI must be asked instead (no local socket here, or it did not answer).
 */
export async function inspectImagesViaSocket(
  names: string[],
  env: NodeJS.ProcessEnv = process.env,
  timeoutMs = 30_000,
): Promise<(unknown | null)[] | undefined> {
  const socket = localDockerSocket(env);
  if (!socket) return undefined;
  const answers = await Promise.all(names.map((name) => inspectOne(socket, name, timeoutMs)));
  return answers.some((a) => a === undefined) ? undefined : answers;
}
