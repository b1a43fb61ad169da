import { createServer } from "node:net";
import type { TestAgent } from "../../helpers/agent.js";
import { signalGroup } from "../../../sandbox-agent/process/os.js";

/** A port nobody listens on right now (the kernel's pick; used at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Kills the process group of every process the agent started that still has one, so nothing outlives the test file. */
export function killAll(agent: TestAgent): void {
  for (const p of agent.runtime.deps.processes.list()) {
    const run = agent.runtime.deps.processes.runOf(Number(p.pid));
    if (run?.alive) signalGroup(run.runPid, "SIGKILL");
  }
}

export async function until<T>(check: () => T | Promise<T>, what: string, tries = 500): Promise<NonNullable<T>> {
  for (let i = 0; i < tries; i++) {
    const value = await check();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A one-line HTTP server: node listening on `host:port`. */
export function nodeServer(port: number, host = "0.0.0.0"): string {
  return `exec node -e "require('http').createServer((q,s)=>s.end('hello from '+process.pid)).listen(${port},'${host}')"`;
}
