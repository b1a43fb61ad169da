import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * --in-sandbox-port: the sandbox API for the sandbox's own processes on
 * 127.0.0.1:<port> without a token, as the platform's daemon on 8080 (which
 * does no auth), while the launcher's listener keeps requiring the token.
 */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

let agent: AgentProcess | undefined;
afterEach(async () => {
  agent?.child.kill("SIGTERM");
  await agent?.exited;
  agent = undefined;
});

describe("the agent's in-sandbox port", () => {
  it("answers without a token there, and only there", async () => {
    const port = await freePort();
    const root = trackedTempDir("in-sandbox-root-");
    agent = await spawnAgent([
      "--root",
      root,
      "--data-dir",
      trackedTempDir("in-sandbox-data-"),
      "--token",
      "launcher-secret-token",
      "--in-sandbox-port",
      String(port),
    ]);
    const inside = `http://127.0.0.1:${port}`;
    const started = await fetch(`${inside}/process`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "from-entrypoint", command: "echo hi", waitForCompletion: true }),
    });
    expect(started.status).toBe(200);
    expect(await started.json()).toMatchObject({ name: "from-entrypoint", status: "completed" });
    // The launcher's listener still wants the token, and sees the process the in-sandbox caller started.
    expect((await fetch(`${agent.url}/process`)).status).toBe(401);
    const listed = (await (await fetch(`${agent.url}/process`, { headers: { authorization: "Bearer launcher-secret-token" } })).json()) as { name: string }[];
    expect(listed.map((p) => p.name)).toContain("from-entrypoint");
  });

  it("a port already taken: the agent says so and exits", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      await expect(
        spawnAgent([
          "--root",
          trackedTempDir("in-sandbox-root-"),
          "--data-dir",
          trackedTempDir("in-sandbox-data-"),
          "--token",
          "t0ken-t0ken",
          "--in-sandbox-port",
          String(port),
        ]),
      ).rejects.toThrow(/--in-sandbox-port/);
    } finally {
      blocker.close();
    }
  });
});
