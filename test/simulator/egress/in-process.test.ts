import { connect } from "node:net";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { asSimulatorRequest } from "../../../simulator/egress/in-process.js";
import { forwardHeaders } from "../../../simulator/egress/messages.js";

/**
 * A request the egress proxy hands to the simulator's handler in process
 * reads as the simulator's own listener would have parsed it after the
 * proxy's forwarding: hop-by-hop headers gone, injected ones in, repeated
 * headers folded as Node folds them, the body's chunked framing kept.
 */
async function rewritten(
  rawRequest: string,
  inject?: Record<string, string>,
): Promise<{ headers: IncomingHttpHeaders; raw: string[]; url: string; body: string }> {
  const server = createServer((req, res) => {
    const out = asSimulatorRequest(req, forwardHeaders(req.rawHeaders, inject), "/rewritten?q=1");
    let body = "";
    out.on("data", (c) => (body += c));
    out.on("end", () => {
      res.end();
      resolve({ headers: out.headers, raw: out.rawHeaders, url: out.url!, body });
    });
  });
  let resolve!: (v: { headers: IncomingHttpHeaders; raw: string[]; url: string; body: string }) => void;
  const done = new Promise<{ headers: IncomingHttpHeaders; raw: string[]; url: string; body: string }>((r) => (resolve = r));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const socket = connect((server.address() as AddressInfo).port, "127.0.0.1", () => socket.write(rawRequest));
  try {
    return await done;
  } finally {
    socket.destroy();
    server.close();
  }
}

describe("a request handed to the simulator in process", () => {
  it("drops hop-by-hop headers, injects, folds repeats as Node does, keeps chunked framing", async () => {
    const got = await rewritten(
      "POST http://x.example/a HTTP/1.1\r\nHost: one.example\r\nHost: two.example\r\nConnection: keep-alive, x-drop\r\nX-Drop: 1\r\nProxy-Authorization: Basic abc\r\n" +
        "Accept: a\r\nAccept: b\r\nCookie: c=1\r\nCookie: d=2\r\nX-Api-Key: from-client\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      { "x-api-key": "injected" },
    );
    expect(got.url).toBe("/rewritten?q=1");
    expect(got.headers.host).toBe("one.example");
    expect(got.headers.accept).toBe("a, b");
    expect(got.headers.cookie).toBe("c=1; d=2");
    expect(got.headers["x-api-key"]).toBe("injected");
    expect(got.headers["transfer-encoding"]).toBe("chunked");
    for (const gone of ["connection", "x-drop", "proxy-authorization"]) expect(got.headers[gone]).toBeUndefined();
    expect(got.raw).toContain("x-api-key");
    expect(got.raw).not.toContain("from-client");
    expect(got.body).toBe("hello");
  });
});
