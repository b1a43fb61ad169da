import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const AGENT_MAIN = fileURLToPath(new URL("../../dist/sandbox-agent/main.js", import.meta.url));

export interface AgentProcess {
  url: string;
  child: ChildProcess;
  stderr: () => string;
  /** Waits for the process to exit (after a signal). */
  exited: Promise<number | null>;
}

/**
 * Runs the built agent (dist/, compiled by `npm test` before vitest starts) as
 * a real child process on a free port, so tests can SIGTERM or kill -9 it.
 */
export async function spawnAgent(args: string[], env: NodeJS.ProcessEnv = {}, options: { ipc?: boolean; launcher?: readonly string[] } = {}): Promise<AgentProcess> {
  if (!existsSync(AGENT_MAIN)) throw new Error(`${AGENT_MAIN} is missing: run npm run build first`);
  // `launcher`: an argv that execs the agent in turn (setpriv, unshare), so the child is still the agent.
  const argv = [...(options.launcher ?? []), process.execPath, AGENT_MAIN, "--port", "0", "--log-level", "warn", ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    // ipc: the channel a launcher starts an agent with (--port-handoff).
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`agent did not start: ${err}`)), 15_000);
    child.stdout!.on("data", (d) => {
      out += d;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`agent exited with ${code}: ${err}`));
    });
  });
  return { url, child, stderr: () => err, exited };
}
