import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LaunchError, ProcessLauncher, type AgentHandle } from "../../../simulator/launcher/index.js";
import { isAlive } from "../../../simulator/launcher/proc.js";
import { exec, specFor, tempBase } from "./helpers.js";

const base = tempBase();
const launcher = new ProcessLauncher();
const running: AgentHandle[] = [];
afterAll(async () => {
  await Promise.all(running.map((h) => h.stop(1_000)));
  rmSync(base, { recursive: true, force: true });
});

describe("process launcher", () => {
  it("starts a healthy agent on a free loopback port that requires the per-sandbox token", async () => {
    const spec = specFor(base, "alpha");
    const agent = await launcher.start(spec);
    running.push(agent);
    expect(agent.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(agent.pid).toBeGreaterThan(0);
    expect((await fetch(`${agent.url}/filesystem/`)).status).toBe(401);
    const put = await fetch(`${agent.url}/filesystem/hello.txt`, {
      method: "PUT",
      headers: { authorization: `Bearer ${spec.token}`, "content-type": "application/json" },
      body: JSON.stringify({ content: "hi" }),
    });
    expect(put.status).toBe(200);
    expect(readFileSync(join(spec.rootDir, "hello.txt"), "utf8")).toBe("hi");
  });

  it("gives the agent the sandbox's env and none of the simulator's", async () => {
    process.env.SIM_ONLY_SECRET = "must-not-leak";
    const spec = specFor(base, "envs", { env: { GREETING: "hello from spec" } });
    const agent = await launcher.start(spec);
    running.push(agent);
    delete process.env.SIM_ONLY_SECRET;
    const { stdout } = await exec(agent.url, spec.token, 'echo "$GREETING|${SIM_ONLY_SECRET:-unset}|${SANDBOX_AGENT_TOKEN:-unset}"');
    // The agent keeps its own token from the processes it runs.
    expect(stdout.trim()).toBe("hello from spec|unset|unset");
  });

  it("keeps the token out of the agent's /proc environ and cmdline, where sandbox processes could read it", async () => {
    const spec = specFor(base, "environ");
    const agent = await launcher.start(spec);
    running.push(agent);
    const environ = readFileSync(`/proc/${agent.pid}/environ`, "utf8");
    const cmdline = readFileSync(`/proc/${agent.pid}/cmdline`, "utf8");
    expect(environ).not.toContain(spec.token);
    expect(cmdline).not.toContain(spec.token);
    const { stdout } = await exec(agent.url, spec.token, `cat /proc/${agent.pid}/environ | tr '\\0' '\\n' | grep -c SANDBOX_AGENT_TOKEN || true`);
    expect(stdout.trim()).toBe("0");
    expect((await fetch(`${agent.url}/filesystem/`)).status).toBe(401);
  });

  it("stop sends SIGTERM: the agent exits cleanly and its port closes", async () => {
    const agent = await launcher.start(specFor(base, "stopper"));
    const exit = await agent.stop();
    expect(exit.code).toBe(0);
    await expect(fetch(`${agent.url}/health`)).rejects.toThrow();
    expect(await agent.exited).toEqual(exit);
  });

  it("stop falls back to SIGKILL when the agent ignores SIGTERM", async () => {
    // A stand-in that behaves like an agent but ignores SIGTERM: only a stubborn process can test the fallback.
    const stubborn = join(base, "stubborn.mjs");
    writeFileSync(
      stubborn,
      `
      import { createServer } from "node:http";
      process.on("SIGTERM", () => {});
      const s = createServer((req, res) => res.end("{}")).listen(0, "127.0.0.1", () =>
        process.stdout.write("sandbox-agent listening on http://127.0.0.1:" + s.address().port + "\\n"));
    `,
    );
    const agent = await new ProcessLauncher({ agentMain: stubborn }).start(specFor(base, "stubborn"));
    const exit = await agent.stop(300);
    expect(exit.signal).toBe("SIGKILL");
  });

  it("fails with the agent's own complaint when it cannot start", async () => {
    const spec = specFor(base, "broken", { logLevel: "not-a-level" });
    const err = await launcher.start(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LaunchError);
    expect(String((err as Error).message)).toMatch(/exited before it was ready.*log-level/s);
  });

  it("reaps an agent a previous simulator run left behind on the same data dir", async () => {
    const spec = specFor(base, "orphaned");
    const first = await launcher.start(spec);
    expect(existsSync(join(spec.dataDir, "launcher.pid"))).toBe(true);
    // The simulator "died": nobody stops `first`. The next run starts the same sandbox.
    const second = await launcher.start(spec);
    running.push(second);
    const exit = await first.exited;
    expect(exit.code).toBe(0); // SIGTERM: it shut down cleanly
    expect(isAlive(first.pid!)).toBe(false);
    expect((await fetch(`${second.url}/health`)).status).toBe(200);
  });
});

describe("process launcher with warm agents", () => {
  it("hands a pre-started agent its sandbox: root, data dir, token and env are the sandbox's", async () => {
    const warm = new ProcessLauncher({ warm: 1 });
    try {
      process.env.SIM_ONLY_SECRET = "must-not-leak";
      const first = await warm.start(specFor(base, "warm-a", { env: { WHO: "a" } }));
      const second = await warm.start(specFor(base, "warm-b", { env: { WHO: "b" } }));
      delete process.env.SIM_ONLY_SECRET;
      running.push(first, second);
      for (const [agent, name] of [
        [first, "warm-a"],
        [second, "warm-b"],
      ] as const) {
        const spec = specFor(base, name);
        expect((await fetch(`${agent.url}/filesystem/`)).status).toBe(401);
        const { stdout } = await exec(agent.url, spec.token, 'echo "$WHO|${SIM_ONLY_SECRET:-unset}|$(pwd)"; touch made-here');
        expect(stdout.trim()).toBe(`${name.slice(-1)}|unset|${spec.rootDir}`);
        expect(existsSync(join(spec.rootDir, "made-here"))).toBe(true);
        expect(existsSync(join(spec.dataDir, "launcher.pid"))).toBe(true);
      }
      const exit = await first.stop();
      expect(exit.code).toBe(0);
    } finally {
      await warm.close();
    }
  });
  it("an agent whose sandbox names NODE_EXTRA_CA_CERTS starts with it, warm pool or not (Node reads it at start-up only)", async () => {
    const warm = new ProcessLauncher({ warm: 1 });
    try {
      await warm.warmed();
      const ca = "/etc/ssl/certs/ca-certificates.crt";
      const agent = await warm.start(specFor(base, "warm-ca", { env: { NODE_EXTRA_CA_CERTS: ca } }));
      running.push(agent);
      const environ = readFileSync(`/proc/${agent.pid}/environ`, "utf8").split("\0");
      expect(environ).toContain(`NODE_EXTRA_CA_CERTS=${ca}`);
    } finally {
      await warm.close();
    }
  });
});
