import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";
import { sandboxAt } from "../../helpers/sdk.js";

/**
 * Commands run through the agent's own SHELL and SHELL_ARGS, as the reference
 * daemon's (`$SHELL $SHELL_ARGS <command>`, `sh -c` when unset): its own
 * suite runs `function hello() { echo world; }; hello` and `source
 * /etc/profile`, which need a shell that has them. A request's env cannot
 * change the shell.
 */
const bash = ["/bin/bash", "/usr/bin/bash"].find((p) => existsSync(p));
const agents: AgentProcess[] = [];
async function agentWith(env: NodeJS.ProcessEnv): Promise<string> {
  const root = tempDir("shell-root-");
  const agent = await spawnAgent(["--no-auth", "--root", root, "--data-dir", tempDir("shell-data-")], env);
  agents.push(agent);
  return agent.url;
}
afterAll(async () => {
  for (const a of agents) {
    a.child.kill("SIGTERM");
    await a.exited;
  }
});
const run = async (url: string, body: object) =>
  (
    await request(url)
      .post("/process")
      .send({ ...body, waitForCompletion: true })
      .expect(200)
  ).body;

describe.skipIf(!bash)(`an agent started with SHELL=bash${bash ? "" : " (skipped: no bash here)"}`, () => {
  let url: string;
  let script: string;
  beforeAll(async () => {
    url = await agentWith({ SHELL: bash, SHELL_ARGS: "-e -c" });
    script = join(tempDir("shell-src-"), "env.sh");
    writeFileSync(script, "export FROM_SOURCE=sourced\n");
  });

  it("runs bash's own syntax: function f(), source, process substitution (the reference suite's commands)", async () => {
    expect(await run(url, { command: "function hello() { echo world; }; hello" })).toMatchObject({ exitCode: 0, stdout: "world\n" });
    expect(await run(url, { command: `source ${script} && echo $FROM_SOURCE` })).toMatchObject({ exitCode: 0, stdout: "sourced\n" });
    expect(await run(url, { command: "cat <(echo a)" })).toMatchObject({ exitCode: 0, stdout: "a\n" });
  });

  it("passes SHELL_ARGS split on whitespace (-e stops at the first failure)", async () => {
    expect(await run(url, { command: "false; echo after" })).toMatchObject({ status: "failed", exitCode: 1, stdout: "" });
  });

  it("ignores a SHELL in the request's env for picking the shell (the command still sees it)", async () => {
    const body = await run(url, { command: 'echo "$0 $SHELL"; function f() { :; }', env: { SHELL: "/bin/sh" } });
    expect(body).toMatchObject({ exitCode: 0, stdout: `${bash} /bin/sh\n` });
  });

  it("through the SDK's process.exec too", async () => {
    const sandbox = await sandboxAt(url);
    const p = await sandbox.process.exec({ command: "function hello() { echo world; }; hello", waitForCompletion: true });
    expect(p.stdout).toBe("world\n");
  });
});

describe("an agent without SHELL", () => {
  it("runs commands with sh -c, sh looked up on its PATH", async () => {
    const url = await agentWith({ SHELL: "", SHELL_ARGS: "" });
    const body = await run(url, { command: 'echo "$0"' });
    expect(body.stdout).toMatch(/^\/(usr\/)?bin\/sh\n$/);
  });
});

describe("an agent whose SHELL is no program", () => {
  it("answers 422 saying the command could not start", async () => {
    const url = await agentWith({ SHELL: "/nonexistent/shell" });
    const res = await request(url).post("/process").send({ command: "echo hi", waitForCompletion: true }).expect(422);
    expect(res.body.error).toMatch(/^failed to start process: .*\/nonexistent\/shell.*ENOENT/);
  });
});
