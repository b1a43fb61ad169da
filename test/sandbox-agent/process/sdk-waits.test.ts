import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { sandboxAt } from "../../helpers/sdk.js";
import { freePort, killAll, nodeServer, until } from "./helpers.js";

const TOKEN = "sdk-waits-token";
let agent: TestAgent;
let sandbox: Awaited<ReturnType<typeof sandboxAt>>;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  sandbox = await sandboxAt(agent.url, "waits", { apiKey: TOKEN });
});
afterAll(async () => {
  killAll(agent);
  await agent.stop();
});

describe("@blaxel/core sandbox.process: waits, restarts, stdin", () => {
  it("exec with waitForPorts resolves once a real server listens", async () => {
    const port = await freePort();
    const started = await sandbox.process.exec({ command: `sleep 0.3; ${nodeServer(port)}`, name: "sdk-web", waitForPorts: [port], timeout: 20 });
    expect(started).toMatchObject({ name: "sdk-web", status: "running", logs: null });
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toMatch(/^hello from/);
    await sandbox.process.kill("sdk-web");
  });

  it("exec with waitForCompletion past its timeout throws the 422; the process keeps running", async () => {
    await expect(sandbox.process.exec({ command: "sleep 30", name: "sdk-slow", waitForCompletion: true, timeout: 1 })).rejects.toThrow(
      /timed out after 1 seconds/,
    );
    expect((await sandbox.process.get("sdk-slow")).status).toBe("running");
    await sandbox.process.kill("sdk-slow");
  });

  it("restartOnFailure with maxRestarts: restartCount in the record", async () => {
    const result = await sandbox.process.exec({
      command: "echo attempt; exit 1",
      name: "sdk-flaky",
      restartOnFailure: true,
      maxRestarts: 1,
      waitForCompletion: true,
    });
    expect(result).toMatchObject({ status: "failed", exitCode: 1, restartOnFailure: true, maxRestarts: 1, restartCount: 1 });
    expect(await sandbox.process.logs("sdk-flaky", "stdout")).toBe("attempt\n\n[Process failed with exit code 1. Attempting restart 1/1...]\nattempt\n");
  });

  it("stdin: writeStdin feeds a line-reading process; closeStdin ends it", async () => {
    const started = await sandbox.process.exec({ command: 'while IFS= read -r l; do echo "rpc:$l"; done', name: "sdk-stdin", stdin: true });
    expect(started.stdin).toBe(true);
    await sandbox.process.writeStdin("sdk-stdin", '{"jsonrpc":"2.0","id":1}\n');
    await sandbox.process.writeStdin(started.pid, "second\n");
    await sandbox.process.closeStdin("sdk-stdin");
    const ended = await sandbox.process.wait("sdk-stdin", { maxWait: 10_000, interval: 50 });
    expect(ended.status).toBe("completed");
    expect(await sandbox.process.logs("sdk-stdin")).toBe('rpc:{"jsonrpc":"2.0","id":1}\nrpc:second\n');
    await expect(sandbox.process.writeStdin("sdk-stdin", "late\n")).rejects.toThrow(/has ended|409/);
  });

  it("a keepAlive process with a timeout is killed by it", async () => {
    await sandbox.process.exec({ command: "sleep 30", name: "sdk-kept", keepAlive: true, timeout: 1 });
    const status = await until(async () => {
      const p = await sandbox.process.get("sdk-kept");
      return p.status !== "running" ? p.status : undefined;
    }, "the kill");
    expect(status).toBe("killed");
  });
});
