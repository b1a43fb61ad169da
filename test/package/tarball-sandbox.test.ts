import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openReadyTerminal, run } from "../helpers/terminal-client.js";
import { isolationUnavailable } from "../helpers/sandbox-procs.js";
import { trackedTempDir } from "../helpers/temp-dirs.js";

/**
 * sandbox-kit installed from its npm tarball, as a user's project gets it
 * (dependencies hoisted beside it, not under it): the simulator starts from
 * there and its default, isolated sandboxes run commands — the agent inside
 * resolves its dependencies from the project's node_modules.
 */
const repo = join(import.meta.dirname, "../..");
const KEY = "tarball-test-key-0001";

describe.skipIf(isolationUnavailable !== undefined)("installed from the npm tarball", () => {
  let sim: ChildProcess | undefined;
  afterAll(() => {
    if (sim && sim.exitCode === null && sim.signalCode === null) sim.kill("SIGKILL");
  });

  it("starts the simulator and runs a command in an isolated sandbox", async () => {
    const work = trackedTempDir("tarball-");
    const npm = (args: string[], cwd: string) =>
      execFileSync("npm", args, {
        cwd,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" },
      });
    // dist/ is built (npm test builds first): pack it as is.
    npm(["pack", "--ignore-scripts", "--pack-destination", work], repo);
    const tarball = readdirSync(work).find((f) => f.endsWith(".tgz"))!;
    const project = join(work, "project");
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", version: "1.0.0", private: true, type: "module" }));
    // From the npm cache where it can; without install scripts: better-sqlite3's compiled module is this checkout's (same Node).
    npm(["install", "--prefer-offline", "--ignore-scripts", "--no-package-lock", join(work, tarball)], project);
    const installed = join(project, "node_modules", "sandbox-kit");
    expect(existsSync(join(installed, "node_modules", "pino"))).toBe(false); // hoisted: the case that used to fail
    const nativeDir = join(project, "node_modules", "better-sqlite3", "build", "Release");
    mkdirSync(nativeDir, { recursive: true });
    copyFileSync(join(repo, "node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node"), join(nativeDir, "better_sqlite3.node"));
    // node-pty's likewise (the terminal's PTY binding, loaded by the agent inside the sandbox).
    const ptyDir = join(project, "node_modules", "node-pty", "build", "Release");
    mkdirSync(ptyDir, { recursive: true });
    copyFileSync(join(repo, "node_modules", "node-pty", "build", "Release", "pty.node"), join(ptyDir, "pty.node"));

    sim = spawn(
      process.execPath,
      [join(installed, "dist", "simulator", "main.js"), "--port", "0", "--api-key", KEY, "--log-level", "warn", "--image-source", "host"],
      { cwd: project, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    sim.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      sim!.stdout!.setEncoding("utf8").on("data", (d: string) => {
        out += d;
        const match = /sandbox-sim listening on (\S+)/.exec(out);
        if (match) resolve(match[1]!);
      });
      sim!.once("exit", (code) => reject(new Error(`simulator exited with ${code}: ${stderr}`)));
    });
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    const created = await fetch(`${url}/v0/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "from-tarball" } }) });
    expect(created.status, stderr).toBe(200);
    const ran = await fetch(`${url}/sbx/default/from-tarball/process`, {
      method: "POST",
      headers,
      body: JSON.stringify({ command: "echo hello from $(hostname)", waitForCompletion: true }),
    });
    expect(((await ran.json()) as { stdout: string }).stdout.trim()).toBe("hello from from-tarball");
    // The terminal's PTY binding comes with the installed package into the isolated sandbox.
    const term = await openReadyTerminal(`${url}/sbx/default/from-tarball/terminal/ws?token=${KEY}`);
    expect((await run(term, "tty")).trim()).toMatch(/^\/dev\/pts\/\d+$/);
    term.ws.close();
    const exited = new Promise((resolve) => sim!.once("exit", resolve));
    sim.kill("SIGTERM");
    await exited;
  }, 240_000); // npm pack and install, then a simulator
});
