import { createServer, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { portHandoff, PortRefused } from "../../../simulator/launcher/port-handoff.js";
import { spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { startAppServer, type AppServer } from "../../helpers/websocket.js";

/**
 * `--port-handoff`: on the IPC channel its launcher started it with, the
 * agent connects to a port for the launcher and sends the connected socket
 * itself (src/port-handoff.ts). Here without isolation, so it runs anywhere;
 * test/simulator/launcher/port-handoff.test.ts checks it inside a sandbox's network.
 */
let agent: AgentProcess;
let app: AppServer;
const dir = trackedTempDir("handoff-agent-");
const args = ["--root", join(dir, "root"), "--data-dir", join(dir, "data"), "--token", "handoff-token", "--port-handoff"];

beforeAll(async () => {
  app = await startAppServer();
  agent = await spawnAgent(args, {}, { ipc: true });
});
afterAll(async () => {
  agent?.child.kill("SIGTERM");
  await agent?.exited;
  await app?.close();
});

describe("the agent's port hand-off", () => {
  it("hands over a connection to the port: the launcher speaks HTTP over it, the agent is out of the way", async () => {
    const openPort = portHandoff(agent.child);
    const socket = await openPort(app.port);
    const reply = await new Promise<string>((resolve, reject) => {
      let text = "";
      socket
        .setEncoding("utf8")
        .on("data", (d: string) => (text += d))
        .on("end", () => resolve(text))
        .on("error", reject);
      socket.end("GET /echo/over-handoff HTTP/1.0\r\n\r\n");
    });
    expect(reply).toMatch(/^HTTP\/1\.1 200/);
    expect(reply).toContain('"url":"/echo/over-handoff"');
  });

  it("answers with the /port/{n} 502 message when nothing listens, and concurrent requests each get their own answer", async () => {
    const openPort = portHandoff(agent.child);
    const [refused, opened] = await Promise.allSettled([openPort(1), openPort(app.port)]);
    expect(refused.status).toBe("rejected");
    expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(PortRefused);
    expect(((refused as PromiseRejectedResult).reason as Error).message).toContain("nothing is listening on port 1");
    expect(opened.status).toBe("fulfilled");
    (opened as PromiseFulfilledResult<import("node:net").Socket>).value.destroy();
  });

  it("the agent never reads from a socket it hands over: a server that speaks first is heard by the launcher", async () => {
    // The agent's copy stays open until the launcher acknowledges the handle; were it reading, it would take these bytes.
    const greeter: Server = createServer((c) => c.end("hello from the server\n"));
    await new Promise<void>((r) => greeter.listen(0, "127.0.0.1", r));
    try {
      const openPort = portHandoff(agent.child);
      for (let i = 0; i < 20; i++) {
        const socket = await openPort((greeter.address() as AddressInfo).port);
        const heard = await new Promise<string>((resolve, reject) => {
          let text = "";
          socket
            .setEncoding("utf8")
            .on("data", (d: string) => (text += d))
            .on("end", () => resolve(text))
            .on("error", reject);
        });
        expect(heard).toBe("hello from the server\n");
      }
    } finally {
      greeter.close();
    }
  });

  it("refuses to start without an IPC channel to answer on", async () => {
    const without = trackedTempDir("handoff-agent-none-");
    await expect(spawnAgent(["--root", join(without, "root"), "--data-dir", join(without, "data"), "--port-handoff"])).rejects.toThrow(
      /--port-handoff needs the IPC channel/,
    );
  });
});
