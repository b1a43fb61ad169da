import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import type { SandboxTarget } from "../../../simulator/proxy/index.js";
import { startProxy, type ProxyHarness } from "../proxy/harness.js";
import { until } from "../../helpers/terminal-client.js";

/**
 * An open WebSocket through the sandbox URL (a terminal, a hot-reload socket)
 * is use of the sandbox for as long as it is open, not only when it opens:
 * the proxy marks it in use at an interval until the socket closes.
 */
let harness: ProxyHarness;
let upstream: WebSocketServer;
const marks: SandboxTarget[] = [];

beforeAll(async () => {
  upstream = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  upstream.on("connection", (ws) => ws.on("message", (m) => ws.send(String(m))));
  await new Promise((r) => upstream.once("listening", r));
  harness = await startProxy({ markInUse: (t) => marks.push(t), inUseEveryMs: 40 });
  harness.sandboxes.set("box", { url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, token: "agent-token" });
});
afterAll(async () => {
  await harness?.close();
  await new Promise((r) => upstream?.close(r));
});

describe("an upgraded connection through the sandbox URL", () => {
  it("marks the sandbox in use while it is open, and stops when it closes", async () => {
    const ws = new WebSocket(`${harness.url.replace("http", "ws")}/sbx/ws/box/terminal/ws`, { headers: { authorization: "Bearer key-of-ws" } });
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    await until(() => marks.length >= 3);
    expect(marks[0]).toMatchObject({ workspace: "ws", sandbox: "box" });
    ws.close();
    await new Promise((r) => ws.once("close", r));
    await new Promise((r) => setTimeout(r, 100)); // the proxy's side closes with it
    const after = marks.length;
    await new Promise((r) => setTimeout(r, 200));
    expect(marks.length).toBe(after);
  });
});
