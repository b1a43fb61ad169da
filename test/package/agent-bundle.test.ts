import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
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

function node(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env.NODE_OPTIONS; // vitest's, if any, would change V8's flags
  const result = spawnSync(process.execPath, args, { encoding: "utf8", env, timeout: 60_000 });
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

  it("starts through its stub and prints nothing on stderr", () => {
    const run = node([...AGENT_NODE_FLAGS, resolve(import.meta.dirname, "../../dist/sandbox-agent/main.js"), "--help"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("Usage: sandbox-agent");
    expect(run.stderr).toBe("");
  });
});
