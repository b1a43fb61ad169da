import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { AGENT_NODE_FLAGS } from "../../simulator/launcher/agent-main.js";

/**
 * The agent as the build leaves it (scripts/bundle-agent.mjs): one CommonJS file with V8's code cache beside it.
 * A cache V8 rejects is no error (the loader compiles from source), so nothing else would notice a build that
 * made it under other flags than the agent runs with, or for another file: checked here. Runs after
 * `npm run build` (npm test builds first).
 */
const agentDir = resolve(import.meta.dirname, "../../dist/agent");
const stub = resolve(import.meta.dirname, "../../dist/sandbox-agent/main.js");

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function agentEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS; // vitest's, if any, would change V8's flags
  return env;
}

function node(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, args, { encoding: "utf8", env: agentEnv(), timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("the agent's bundle", () => {
  it("is accepted by V8 with its code cache under the agent's own flags, and rejected under others (the cache is flag-bound)", () => {
    const probe = (flags: string[]) =>
      node([
        ...flags,
        "-e",
        `const vm = require("node:vm"), fs = require("node:fs");
         const file = ${JSON.stringify(join(agentDir, "agent.cjs"))};
         const script = new vm.Script(fs.readFileSync(file, "latin1"), { filename: file, cachedData: fs.readFileSync(file + ".cache") });
         process.stdout.write(String(script.cachedDataRejected));`,
      ]).stdout;
    expect(probe(AGENT_NODE_FLAGS)).toBe("false");
    expect(probe([])).toBe("true");
  });

  it("is ASCII (the loader reads it as latin1) and has no import() left (a vm.Script runs one only through an experimental hook)", () => {
    const bytes = readFileSync(join(agentDir, "agent.cjs"));
    expect(bytes.findIndex((b) => b > 0x7f)).toBe(-1);
    expect(/[^\w$.]import\("/.exec(bytes.toString("latin1"))).toBeNull();
  });

  it("holds better-sqlite3's JavaScript and loads only its addon from node_modules (an agent opens its database through it)", async () => {
    const code = readFileSync(join(agentDir, "agent.cjs"), "latin1");
    expect(code).not.toContain('require("better-sqlite3")');
    expect(code).not.toContain('require("bindings")');
    expect(code).toContain('require("better-sqlite3/build/Release/better_sqlite3.node")');
    // An agent started through the bundle opens its database (before it prints its address) with that addon.
    const dir = mkdtempSync(join(tmpdir(), "agent-bundle-"));
    try {
      const agent = spawn(process.execPath, [...AGENT_NODE_FLAGS, stub, "--port", "0", "--root", join(dir, "root"), "--data-dir", join(dir, "data")], {
        stdio: ["ignore", "pipe", "pipe"],
        env: agentEnv(),
      });
      let stderr = "";
      agent.stderr.on("data", (d: Buffer) => (stderr += d));
      const exited = new Promise((resolve) => agent.once("exit", resolve));
      try {
        const url = await new Promise<string>((resolve, reject) => {
          let out = "";
          agent.stdout.on("data", (d: Buffer) => {
            out += d;
            const m = /listening on (http:\/\/\S+)/.exec(out);
            if (m) resolve(m[1]!);
          });
          void exited.then(() => reject(new Error(`the agent exited: ${stderr}`)));
        });
        expect((await fetch(`${url}/health`)).status).toBe(200);
        expect(existsSync(join(dir, "data", "agent.db"))).toBe(true);
      } finally {
        agent.kill("SIGKILL");
        await exited;
      }
      expect(isAlive(agent.pid!)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("starts through its stub and prints nothing on stderr", () => {
    const run = node([...AGENT_NODE_FLAGS, stub, "--help"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("Usage: sandbox-agent");
    expect(run.stderr).toBe("");
  });
});
