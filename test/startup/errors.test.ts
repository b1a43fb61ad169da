import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trackedTempDir } from "../helpers/temp-dirs.js";

/**
 * Start-up mistakes, run as a person would (the built programs): each ends with one line on stderr
 * saying what is wrong and what to do, exit code 2, no stack trace, and nothing left behind.
 */
const SIM = fileURLToPath(new URL("../../dist/simulator/main.js", import.meta.url));
const AGENT = fileURLToPath(new URL("../../dist/sandbox-agent/main.js", import.meta.url));

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(main: string, args: string[], cwd: string, tmp: string): Promise<Ended> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [main, ...args], {
      cwd,
      env: { ...process.env, TMPDIR: tmp, LOG_FORMAT: "json" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The one line a mistake prints: stderr holds exactly it, no stack frames. */
function oneLine(ended: Ended): string {
  const lines = ended.stderr.split("\n").filter(Boolean);
  expect(lines, ended.stderr).toHaveLength(1);
  expect(ended.stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

let dir: string;
let busy: Server;
let busyPort: number;
beforeAll(async () => {
  dir = trackedTempDir("startup-errors-");
  busy = createServer();
  await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
  busyPort = (busy.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => busy.close(() => r())));

function freshTmp(name: string): string {
  const tmp = join(dir, `tmp-${name}`);
  mkdirSync(tmp);
  return tmp;
}

describe("sandbox-sim start-up mistakes", () => {
  it("a port in use: one line naming the port and --port, exit 2, no temp dir left", async () => {
    const tmp = freshTmp("sim-port");
    // --log-level error: the process launcher's own "NOT ISOLATED" warning is not what this test is about.
    const ended = await run(SIM, ["--port", String(busyPort), "--launcher", "process", "--log-level", "error"], dir, tmp);
    expect(ended.code).toBe(2);
    expect(oneLine(ended)).toBe(
      `sandbox-sim: port ${busyPort} on 127.0.0.1 is already in use: stop what holds it, or pass --port <n> (--port 0 picks a free one)`,
    );
    expect(readdirSync(tmp)).toEqual([]);
  });

  it("a --seed file that is missing, not JSON, or of the wrong shape", async () => {
    writeFileSync(join(dir, "bad.json"), "{ accounts: ");
    writeFileSync(join(dir, "shape.json"), JSON.stringify({ users: [{ email: "not-an-email", accountId: "a" }] }));
    const missing = await run(SIM, ["--port", "0", "--seed", "nope.json"], dir, freshTmp("seed1"));
    expect(missing.code).toBe(2);
    expect(oneLine(missing)).toBe(`sandbox-sim: --seed ${join(dir, "nope.json")}: no such file`);
    const bad = await run(SIM, ["--port", "0", "--seed", "bad.json"], dir, freshTmp("seed2"));
    expect(bad.code).toBe(2);
    expect(oneLine(bad)).toMatch(/^sandbox-sim: --seed \S+bad\.json is not valid JSON: /);
    const shape = await run(SIM, ["--port", "0", "--seed", "shape.json"], dir, freshTmp("seed3"));
    expect(shape.code).toBe(2);
    expect(oneLine(shape)).toMatch(
      /^sandbox-sim: --seed \S+shape\.json: users\.0\.email: .*\(expected \{accounts, workspaces, users\} as POST \/_sim\/seed takes\)$/,
    );
  });

  it("an unknown option: one line and a hint to --help, not the whole usage", async () => {
    const ended = await run(SIM, ["--bogus"], dir, freshTmp("sim-opt"));
    expect(ended.code).toBe(2);
    expect(oneLine(ended)).toMatch(/^sandbox-sim: Unknown option '--bogus'.* \(sandbox-sim --help lists the options\)$/);
  });
});

describe("sandbox-agent start-up mistakes", () => {
  it("a port in use: one line, exit 2, and nothing started (no scheduler line, no data dir)", async () => {
    const ended = await run(AGENT, ["--port", String(busyPort), "--root", "r1", "--data-dir", "d1"], dir, freshTmp("agent-port"));
    expect(ended.code).toBe(2);
    expect(oneLine(ended)).toBe(
      `sandbox-agent: port ${busyPort} on 127.0.0.1 is already in use: stop what holds it, or pass --port <n> (--port 0 picks a free one)`,
    );
    expect(ended.stdout).toBe("");
    expect(existsSync(join(dir, "d1", "agent.db"))).toBe(false);
  });

  it("--root naming a file: one line, exit 2", async () => {
    writeFileSync(join(dir, "a-file"), "x");
    const ended = await run(AGENT, ["--port", "0", "--root", "a-file", "--data-dir", "d2"], dir, freshTmp("agent-root"));
    expect(ended.code).toBe(2);
    expect(oneLine(ended)).toBe(`sandbox-agent: --root ${join(dir, "a-file")} is a file, not a directory: pass a directory (a missing one is created)`);
  });

  it("an unknown option: one line and a hint to --help", async () => {
    const ended = await run(AGENT, ["--nope"], dir, freshTmp("agent-opt"));
    expect(ended.code).toBe(2);
    expect(oneLine(ended)).toMatch(/^sandbox-agent: Unknown option '--nope'.* \(sandbox-agent --help lists the options\)$/);
  });

  it("a missing --root is created, and the log says so; the defaults live under ./.sandbox", async () => {
    const child = spawn(process.execPath, [AGENT, "--port", "0"], { cwd: dir, env: { ...process.env, LOG_FORMAT: "json" }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (d) => String(d).includes("listening on") && resolve());
      child.on("exit", (code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
    child.kill("SIGTERM");
    await new Promise((r) => child.on("exit", r));
    expect(existsSync(join(dir, ".sandbox", "root"))).toBe(true);
    expect(existsSync(join(dir, ".sandbox", "data", "agent.db"))).toBe(true);
    const created = stderr
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { msg: string; root?: string })
      .find((l) => /did not exist: created it/.test(l.msg));
    expect(created?.root).toBe(join(dir, ".sandbox", "root"));
  });
});
