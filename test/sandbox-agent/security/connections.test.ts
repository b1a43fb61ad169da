import { connect, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { openAgent, type AgentRuntime } from "../../../sandbox-agent/agent.js";
import { createApp } from "../../../sandbox-agent/app.js";
import { AgentConfigSchema } from "../../../sandbox-agent/config.js";
import { defaultMaxConnections, listen, type Serving } from "../../../src/serve.js";
import { tempDir } from "../../helpers/agent.js";

/**
 * Idle connections and never-ending bodies are cut, long
 * responses are not, and a flood of idle connections leaves room for /health.
 * Short timeouts here; the agent's are 30 s (headers) and 2 min (idle, body).
 */
let runtime: AgentRuntime;
let serving: Serving;
const sockets: Socket[] = [];
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await serving?.stop(100);
  await runtime?.close();
});

async function startAgent(maxConnections: number) {
  const base = tempDir();
  const config = Object.freeze(AgentConfigSchema.parse({ port: 0, root: `${base}/root`, dataDir: `${base}/data`, logLevel: "silent" }));
  runtime = await openAgent(config);
  serving = await listen(createApp(runtime.deps), "127.0.0.1", 0, {
    headersTimeoutMs: 300,
    idleTimeoutMs: 300,
    bodyIdleTimeoutMs: 300,
    checkIntervalMs: 50,
    maxConnections,
  });
}

// A socket's close is awaited from the moment it exists (on a loaded machine the server may cut it before
// the test gets round to listening), and what the server writes is read: Node's own headers timeout may
// answer 408 before closing, and a paused socket with unread data never reports its end.
const closes = new WeakMap<Socket, Promise<void>>();
const closed = (socket: Socket) => closes.get(socket)!;
const open = () =>
  new Promise<Socket>((resolve, reject) => {
    const s = connect(serving.port, "127.0.0.1", () => resolve(s));
    closes.set(s, new Promise<void>((done) => s.once("close", () => done())));
    s.on("error", reject);
    s.resume();
    sockets.push(s);
  });

describe("connections", () => {
  it("cuts a connection that never sends and a chunked body that never ends, not a long response", async () => {
    await startAgent(50);
    const silent = await open();
    const trickle = await open();
    const bothClosed = Promise.all([closed(silent), closed(trickle)]);
    trickle.write(
      `PUT /filesystem/t.bin HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n`,
    );
    // A response that takes several times the timeouts: a process that says nothing for a while.
    const res = await fetch(`${serving.url}/process`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ command: "sleep 1.5; echo finished", waitForCompletion: true }),
    });
    expect(((await res.json()) as { stdout: string }).stdout).toContain("finished");
    await bothClosed;
  }, 30_000);

  it("keeps /health answering when idle connections fill the cap (the oldest idle ones are closed)", async () => {
    const idle = await Promise.all(Array.from({ length: 50 }, () => open()));
    const oneClosed = Promise.race(idle.map(closed));
    const res = await fetch(`${serving.url}/health`);
    expect(res.status).toBe(200);
    await oneClosed; // an idle one made room
  }, 30_000);

  it("derives the cap from the open-files limit, with a reserve", () => {
    expect(defaultMaxConnections(4096)).toBe(3072);
    expect(defaultMaxConnections(1024)).toBe(768);
    expect(defaultMaxConnections(100)).toBe(64);
  });
});
