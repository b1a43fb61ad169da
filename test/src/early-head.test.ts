import { once } from "node:events";
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { flushUnlessBodyFollows } from "../../src/early-head.js";

/** A reply as the relays see it: the upstream's message, and the caller's response with its flushes counted. */
function relayPair(): { upRes: IncomingMessage; res: ServerResponse; flushes: () => number } {
  let flushes = 0;
  const res = { writableEnded: false, destroyed: false, flushHeaders: () => void flushes++ } as unknown as ServerResponse;
  return { upRes: new PassThrough() as unknown as IncomingMessage, res, flushes: () => flushes };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("flushUnlessBodyFollows", () => {
  it("sends the head at once when no body arrives in the reply's first turn (a stream: the caller must not wait for its first byte)", async () => {
    const { upRes, res, flushes } = relayPair();
    flushUnlessBodyFollows(upRes, res);
    await nextTurn();
    expect(flushes()).toBe(1);
  });

  it("leaves the head to go out with the body when the body is already there", async () => {
    const { upRes, res, flushes } = relayPair();
    flushUnlessBodyFollows(upRes, res);
    (upRes as unknown as PassThrough).write("small body");
    upRes.resume();
    await nextTurn();
    expect(flushes()).toBe(0);
  });

  it("leaves an ended or destroyed response alone", async () => {
    const { upRes, res, flushes } = relayPair();
    flushUnlessBodyFollows(upRes, res);
    (res as { destroyed: boolean }).destroyed = true;
    await nextTurn();
    expect(flushes()).toBe(0);
  });

  it("through real sockets, a streamed reply's head reaches the caller before the stream's first byte", async () => {
    const app = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      // The first event is only written once the caller has its head: a relay that waits for a body hangs here.
    });
    app.listen(0, "127.0.0.1");
    await once(app, "listening");
    const relay = createServer((req, res) => {
      const upReq = request({ port: (app.address() as AddressInfo).port, host: "127.0.0.1", path: req.url, method: req.method });
      upReq.on("response", (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        flushUnlessBodyFollows(upRes, res);
        upRes.pipe(res);
      });
      upReq.end();
    });
    relay.listen(0, "127.0.0.1");
    await once(relay, "listening");
    try {
      const caller = request({ port: (relay.address() as AddressInfo).port, host: "127.0.0.1", path: "/events" });
      caller.end();
      const [reply] = (await once(caller, "response")) as [IncomingMessage];
      expect(reply.statusCode).toBe(200);
      expect(reply.headers["content-type"]).toBe("text/event-stream");
      reply.destroy();
    } finally {
      app.closeAllConnections();
      relay.closeAllConnections();
      app.close();
      relay.close();
    }
  });
});
