import { existsSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, parseAgentConfig } from "../../../sandbox-agent/config.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/**
 * --working-dir: where commands start when they name no workingDir (the
 * reference daemon's own working directory, the image's WORKDIR on the
 * platform), created at start as a container runtime creates the image's
 * WorkingDir. A request's workingDir still wins.
 */
let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent({ workingDir: "/srv/app" });
});
afterAll(async () => {
  await agent.stop();
});

describe("the agent's default working directory", () => {
  it("commands with no workingDir start there (made at start); one naming a workingDir starts in it", async () => {
    expect(existsSync(join(agent.root, "srv/app"))).toBe(true);
    const plain = (await request(agent.url).post("/process").send({ command: "pwd", waitForCompletion: true }).expect(200)).body;
    expect(plain).toMatchObject({ logs: `${join(agent.root, "srv/app")}\n`, workingDir: "/srv/app" });
    const named = (await request(agent.url).post("/process").send({ command: "pwd", workingDir: "/", waitForCompletion: true }).expect(200)).body;
    expect(named).toMatchObject({ logs: `${agent.root}\n`, workingDir: "/" });
  });

  it("is an absolute sandbox path, / by default", () => {
    expect(parseAgentConfig([], {})).toMatchObject({ workingDir: "/" });
    expect(parseAgentConfig(["--working-dir", "/blaxel"], {})).toMatchObject({ workingDir: "/blaxel" });
    expect(() => parseAgentConfig(["--working-dir", "relative"], {})).toThrow(ConfigError);
    expect(() => parseAgentConfig(["--working-dir", "relative"], {})).toThrow(/--working-dir/);
  });
});
