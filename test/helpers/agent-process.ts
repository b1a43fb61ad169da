import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
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
export async function spawnAgent(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  options: { ipc?: boolean; launcher?: readonly string[]; main?: string } = {},
): Promise<AgentProcess> {
  if (!existsSync(AGENT_MAIN)) throw new Error(`${AGENT_MAIN} is missing: run npm run build first`);
  // `launcher`: an argv that execs the agent in turn (setpriv, unshare), so the child is still the agent.
  // `main`: another copy of the built agent (agentMainReadableBy, for a launcher that changes user).
  const argv = [...(options.launcher ?? []), process.execPath, options.main ?? AGENT_MAIN, "--port", "0", "--log-level", "warn", ...args];
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

/**
 * The built agent's main as a path another user can run: the checkout's own when `uid` can read it, else a
 * copy of dist/ and node_modules/ (hard links where the file system allows, which cost nothing and leave the
 * checkout's modes alone; a real copy where that user still cannot read them) in a world-readable temp dir.
 * A checkout under a directory only its owner may enter (a `mktemp -d` folder, a mode-700 home) is otherwise
 * out of reach of the unprivileged user a test starts the agent as. `cleanup` removes the copy.
 */
export function agentMainReadableBy(uid: number, gid = uid): { main: string; cleanup: () => void } {
  const canRead = (path: string) => spawnSync("setpriv", [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "test", "-r", path]).status === 0;
  if (canRead(AGENT_MAIN)) return { main: AGENT_MAIN, cleanup: () => {} };
  const checkout = dirname(dirname(dirname(AGENT_MAIN)));
  const copy = mkdtempSync(join(tmpdir(), "sandbox-kit-agent-copy-"));
  chmodSync(copy, 0o755);
  const place = (how: string[]) => {
    for (const part of ["dist", "node_modules", "package.json"]) {
      rmSync(join(copy, part), { recursive: true, force: true });
      const done = spawnSync("cp", [...how, join(checkout, part), join(copy, part)]);
      if (done.status !== 0) return false;
    }
    return true;
  };
  const main = join(copy, "dist", "sandbox-agent", "main.js");
  if (!place(["-al"]) || !canRead(main)) {
    // Other file system, or files only their owner reads: a real copy, made readable.
    if (!place(["-r"]) || spawnSync("chmod", ["-R", "a+rX", copy]).status !== 0) throw new Error(`could not copy the agent to ${copy}`);
  }
  return { main, cleanup: () => rmSync(copy, { recursive: true, force: true }) };
}
